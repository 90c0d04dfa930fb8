// Package dispatch holds the rules of asking a device to flex (docs/platform.md, "Dispatch: asking
// the devices"), with no client and no database: which assets of a flex event are asked and why the
// others are skipped, the dispatch event's id and power level, when dispatches are issued, and the
// state machine of the status an asset controller reports back.
//
// # Who is asked
//
// A flex event's target sites are the settlement's (listed, or actively enrolled at the
// start). A site is asked only when its dispatch consent covers the event's proposition: its
// dispatch methods (spec.dispatchMethods, set by dispatch-consent and dispatch-deconsent) name
// the proposition. Each of its assets whose verdict for the proposition is eligible (the Site
// status's, which already judged the proposition's asset types) is asked, unless its latest
// plug event is plug_out, a charge_now is active at the event's start, or it has no power
// rating. Each skip is counted by reason.
//
// # Identity
//
// A dispatch is identified by a UUIDv5 of the organisation, the flex event and the asset
// (EventID): whoever issues it, however often, it is the same dispatch, the same row, the
// same notification.
package dispatch

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// namespace is the UUIDv5 namespace of dispatch event ids.
var namespace = uuid.MustParse("3c1b8f0e-5d2a-4f7e-9b61-2a0d7c4e9f15")

// EventID is the id of the dispatch of a flex event to an asset: the same (organisation, flex
// event, asset) always gives the same id, so a dispatch issued again is the same dispatch.
func EventID(organisation, flexEvent, assetID string) uuid.UUID {
	return uuid.NewSHA1(namespace, []byte(organisation+"\x00"+flexEvent+"\x00"+assetID))
}

// Lead is how long before its start an event declared far ahead is dispatched.
const Lead = 24 * time.Hour

// IssueAt is when an event created at created and starting at start is dispatched: at once,
// or Lead before its start when it was declared further ahead.
func IssueAt(created, start time.Time) time.Time {
	if at := start.Add(-Lead); at.After(created) {
		return at
	}
	return created
}

// Dispatchable tells whether an event starting at start may still be dispatched at now: never
// once its start has passed (a backdated event is settled, not dispatched).
func Dispatchable(start, now time.Time) bool { return now.Before(start) }

// Consents tells whether a site's dispatch methods cover a proposition.
func Consents(methods []flexv1.DispatchMethod, p flexv1.PropositionName) bool {
	return slices.Contains(methods, flexv1.DispatchMethod(p))
}

// Load tells whether an asset type draws power (a load) rather than storing it: chargers,
// EVs, heat pumps and hot water tanks.
func Load(t flexv1.AssetType) bool {
	switch t {
	case flexv1.AssetTypeCharger, flexv1.AssetTypeElectricVehicle, flexv1.AssetTypeHeatPump, flexv1.AssetTypeHotWaterTank:
		return true
	}
	return false
}

// PowerW is the power an asset is dispatched at: its custom dispatch power when set, else its
// rating; ok is false when it has neither (the asset is skipped, NoPowerRating).
func PowerW(spec flexv1.AssetSpec) (w int64, ok bool) {
	switch {
	case spec.CustomDispatchPowerW != nil && *spec.CustomDispatchPowerW > 0:
		return *spec.CustomDispatchPowerW, true
	case spec.PowerW != nil && *spec.PowerW > 0:
		return *spec.PowerW, true
	}
	return 0, false
}

// LevelKW is the desired power output of an asset of type t dispatched at powerW in direction
// d (positive: giving power to the site; negative: drawing it). A load turned down pauses (0)
// and turned up draws its power; a battery turned down discharges and turned up charges.
func LevelKW(t flexv1.AssetType, d flexv1.FlexDirection, powerW int64) float64 {
	p := float64(powerW) / 1000
	switch {
	case d == flexv1.FlexTurnUp:
		return -p
	case t == flexv1.AssetTypeBattery:
		return p
	}
	return 0
}

// SkipReason says why an asset of a target site was not asked.
type SkipReason string

// The reasons an asset is skipped, as the FlexEvent status counts them.
const (
	NotPluggedIn      SkipReason = "not_plugged_in"
	ChargeNow         SkipReason = "charge_now"
	NoDispatchConsent SkipReason = "no_dispatch_consent"
	NoPowerRating     SkipReason = "no_power_rating"
)

// SkipReasons lists every reason, in the order the status shows them.
var SkipReasons = []SkipReason{NotPluggedIn, ChargeNow, NoDispatchConsent, NoPowerRating}

// DeviceState is what an asset's own events said last, as of the event's start.
type DeviceState struct {
	// PluggedOut: its latest plug event is plug_out (an asset that never reported one is
	// plugged in, as far as Flexsite knows).
	PluggedOut bool
	// ChargeNowUntil is the end of its latest charge_now, unless a charge_now_deleted came
	// after it (zero: none).
	ChargeNowUntil time.Time
}

// Skip decides whether an asset of a consenting site, eligible for the event's proposition,
// is skipped for an event starting at start, and why.
func Skip(spec flexv1.AssetSpec, state DeviceState, start time.Time) (SkipReason, bool) {
	switch {
	case state.PluggedOut:
		return NotPluggedIn, true
	case start.Before(state.ChargeNowUntil):
		return ChargeNow, true
	}
	if _, ok := PowerW(spec); !ok {
		return NoPowerRating, true
	}
	return "", false
}

// Status is a dispatch's state: requested until the asset controller says otherwise, then
// one of prod's EventStatus values, or cancelled when its flex event was deleted first.
type Status string

// The states of a dispatch. The REST API spells the reported ones in capitals (prod's
// EventStatus); the database and the FlexEvent status in lower case.
const (
	Requested Status = "requested"
	Received  Status = "received"
	Accepted  Status = "accepted"
	Rejected  Status = "rejected"
	Executed  Status = "executed"
	Failed    Status = "failed"
	Cancelled Status = "cancelled"
)

// Statuses lists every state in the order of the machine.
var Statuses = []Status{Requested, Received, Accepted, Rejected, Executed, Failed, Cancelled}

// rank orders the states a dispatch moves through: a report may skip forward, never back.
var rank = map[Status]int{Requested: 0, Received: 1, Accepted: 2, Rejected: 2, Executed: 3, Failed: 3}

// Final tells whether nothing may follow s.
func Final(s Status) bool {
	return s == Rejected || s == Executed || s == Failed || s == Cancelled
}

// Reported tells whether s is a status an asset controller may report (prod's EventStatus).
func Reported(s Status) bool {
	return s == Received || s == Accepted || s == Rejected || s == Executed || s == Failed
}

// Refusals of a reported status.
var (
	// ErrStepBack: the report goes back (ACCEPTED after EXECUTED's sibling, RECEIVED after
	// ACCEPTED), or sideways (REJECTED after ACCEPTED).
	ErrStepBack = errors.New("the status goes back")
	// ErrFinal: the dispatch was rejected, executed, failed or cancelled already.
	ErrFinal = errors.New("the dispatch has a final status")
)

// Step judges a report of status to a dispatch in state from: changed is false when it is
// the same status again (200, nothing written); an error is a refusal (409). RECEIVED →
// ACCEPTED | REJECTED; ACCEPTED → EXECUTED | FAILED; a status may be skipped forward
// (EXECUTED straight from requested), never back, and nothing follows a final one.
func Step(from, to Status) (changed bool, err error) {
	if !Reported(to) {
		return false, fmt.Errorf("%q is not a status an asset controller reports", to)
	}
	if from == to {
		return false, nil
	}
	if Final(from) {
		return false, fmt.Errorf("%w: %s", ErrFinal, from)
	}
	// REJECTED ends the offer: after ACCEPTED only EXECUTED or FAILED.
	if rank[to] <= rank[from] || (from == Accepted && to == Rejected) {
		return false, fmt.Errorf("%w: %s after %s", ErrStepBack, to, from)
	}
	return true, nil
}

// Event is prod's DispatchEvent, the data of a dispatch.requested notification.
type Event struct {
	EventID              string  `json:"event_id"`
	AssetID              string  `json:"asset_id"`
	IssuedTimestamp      string  `json:"issued_timestamp"`
	EventTimestamp       string  `json:"event_timestamp"`
	MarketID             string  `json:"market_id"`
	LevelKW              float64 `json:"level_kw"`
	FromTime             string  `json:"from_time"`
	ToTime               string  `json:"to_time"`
	UpdateStatusCallback string  `json:"update_status_callback"`
}

// CancelledEvent is the data of a dispatch.cancelled notification.
type CancelledEvent struct {
	EventID string `json:"event_id"`
	AssetID string `json:"asset_id"`
}

// CallbackPath is the path of the status callback of a dispatch, on Flexsite's public address.
func CallbackPath(assetID string, eventID uuid.UUID) string {
	return "/entities/asset/" + assetID + "/callback/" + eventID.String()
}

// Stamp is a time as the DispatchEvent spells it: UTC, RFC 3339.
func Stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Counts are a flex event's dispatches by state, and its skipped assets by reason.
type Counts struct {
	ByStatus map[Status]int32
	Skipped  map[SkipReason]int32
}

// Issued is how many dispatches were issued, whatever their state.
func (c Counts) Issued() int32 {
	var n int32
	for _, v := range c.ByStatus {
		n += v
	}
	return n
}

// SkippedAll is how many assets were skipped, whatever the reason.
func (c Counts) SkippedAll() int32 {
	var n int32
	for _, v := range c.Skipped {
		n += v
	}
	return n
}

// Summary says the counts in a few words, as kubectl shows them: "12 asked: 3 accepted, 8
// executed, 1 failed; 2 skipped" ("none asked" before any dispatch).
func (c Counts) Summary() string {
	s := "none asked"
	if n := c.Issued(); n > 0 {
		s = fmt.Sprintf("%d asked", n)
		sep := ": "
		for _, st := range Statuses {
			if v := c.ByStatus[st]; v > 0 && st != Requested {
				s += fmt.Sprintf("%s%d %s", sep, v, st)
				sep = ", "
			}
		}
	}
	if n := c.SkippedAll(); n > 0 {
		s += fmt.Sprintf("; %d skipped", n)
	}
	return s
}

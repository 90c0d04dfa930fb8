// Package ocpp turns an EV schedule into an OCPP 1.6 charging profile (section 6.43,
// SetChargingProfile), pure: prod's SetChargingProfileRequest, a TxProfile of kind Absolute in
// watts, which a charge point's central system can send as it is.
//
// The profile starts at the schedule's window start and lasts to its end, or to its last
// block's end when that is later (a request handed back unchanged may run past the ready-by).
// Its blocks are taken in time order, overlapping or touching ones as one. Its periods follow
// the blocks: the charger's power inside a block, 0 W outside it, each period starting where the
// previous one ends (the first at 0 s, as OCPP requires). Limits are whole watts, within the
// schema's one decimal. The profile id is derived from the asset and the window start, so the
// same schedule always builds the same profile and a newer one replaces it on the charge point.
package ocpp

import (
	"hash/fnv"
	"slices"
	"time"

	"github.com/flexsite/flexsite/internal/evschedule"
	"github.com/flexsite/flexsite/internal/settlement"
)

// SetChargingProfileRequest is prod's (OCPP 1.6 SetChargingProfile.req).
type SetChargingProfileRequest struct {
	ConnectorID        int             `json:"connectorId"`
	CSChargingProfiles ChargingProfile `json:"csChargingProfiles"`
}

// ChargingProfile is OCPP 1.6's csChargingProfiles.
type ChargingProfile struct {
	ChargingProfileID      int              `json:"chargingProfileId"`
	TransactionID          *int             `json:"transactionId,omitempty"`
	StackLevel             int              `json:"stackLevel"`
	ChargingProfilePurpose string           `json:"chargingProfilePurpose"`
	ChargingProfileKind    string           `json:"chargingProfileKind"`
	RecurrencyKind         string           `json:"recurrencyKind,omitempty"`
	ValidFrom              *time.Time       `json:"validFrom,omitempty"`
	ValidTo                *time.Time       `json:"validTo,omitempty"`
	ChargingSchedule       ChargingSchedule `json:"chargingSchedule"`
}

// ChargingSchedule is OCPP 1.6's chargingSchedule.
type ChargingSchedule struct {
	Duration               *int                     `json:"duration,omitempty"`
	StartSchedule          *time.Time               `json:"startSchedule,omitempty"`
	ChargingRateUnit       string                   `json:"chargingRateUnit"`
	ChargingSchedulePeriod []ChargingSchedulePeriod `json:"chargingSchedulePeriod"`
	MinChargingRate        *float64                 `json:"minChargingRate,omitempty"`
}

// ChargingSchedulePeriod is OCPP 1.6's chargingSchedulePeriod.
type ChargingSchedulePeriod struct {
	StartPeriod  int     `json:"startPeriod"`
	Limit        float64 `json:"limit"`
	NumberPhases *int    `json:"numberPhases,omitempty"`
}

// The values this builder uses.
const (
	PurposeTx     = "TxProfile"
	KindAbsolute  = "Absolute"
	UnitW         = "W"
	DefaultConnID = 1
)

// Profile builds the charging profile of an EV schedule for the asset, charging at powerW inside
// its blocks and not at all outside them, over [windowStart, windowEnd).
func Profile(assetID string, s evschedule.Schedule, powerW int64) SetChargingProfileRequest {
	blocks := normalise(s.Blocks)
	start, end := s.WindowStart.UTC(), s.WindowEnd.UTC()
	if start.IsZero() && len(blocks) > 0 {
		start, end = blocks[0].Start, blocks[len(blocks)-1].End
	}
	// A schedule handed back unchanged is the device's own request, which may run past the
	// window's deadline (a ready-by earlier than its last block): the profile carries it whole,
	// or the car would charge less than it was answered.
	if k := len(blocks) - 1; k >= 0 && blocks[k].End.After(end) {
		end = blocks[k].End
	}
	var periods []ChargingSchedulePeriod
	add := func(at time.Time, limit float64) {
		off := int(at.Sub(start) / time.Second)
		if k := len(periods) - 1; k >= 0 && periods[k].Limit == limit {
			return
		}
		if k := len(periods) - 1; k >= 0 && periods[k].StartPeriod == off {
			periods[k].Limit = limit
			return
		}
		periods = append(periods, ChargingSchedulePeriod{StartPeriod: off, Limit: limit})
	}
	add(start, 0)
	for _, b := range blocks {
		bs, be := maxTime(b.Start, start), minTime(b.End, end)
		if !bs.Before(be) {
			continue
		}
		add(bs, float64(powerW))
		add(be, 0)
	}
	if k := len(periods) - 1; k > 0 && periods[k].Limit == 0 && periods[k].StartPeriod >= int(end.Sub(start)/time.Second) {
		periods = periods[:k] // a zero period at the very end adds nothing
	}
	duration := int(end.Sub(start) / time.Second)
	validTo := end
	return SetChargingProfileRequest{
		ConnectorID: DefaultConnID,
		CSChargingProfiles: ChargingProfile{
			ChargingProfileID:      profileID(assetID, start),
			StackLevel:             0,
			ChargingProfilePurpose: PurposeTx,
			ChargingProfileKind:    KindAbsolute,
			ValidFrom:              &start,
			ValidTo:                &validTo,
			ChargingSchedule: ChargingSchedule{
				Duration: &duration, StartSchedule: &start, ChargingRateUnit: UnitW,
				ChargingSchedulePeriod: periods,
			},
		},
	}
}

// normalise sorts blocks and merges those that overlap or touch, in UTC: a schedule handed back
// unchanged is the device's request as it sent it, and the periods must follow one another.
func normalise(in []evschedule.Block) []evschedule.Block {
	out := make([]evschedule.Block, 0, len(in))
	for _, b := range in {
		if b.End.After(b.Start) {
			out = append(out, evschedule.Block{Start: b.Start.UTC(), End: b.End.UTC()})
		}
	}
	slices.SortFunc(out, func(a, b evschedule.Block) int { return a.Start.Compare(b.Start) })
	merged := out[:0]
	for _, b := range out {
		if k := len(merged) - 1; k >= 0 && !b.Start.After(merged[k].End) {
			merged[k].End = maxTime(merged[k].End, b.End)
			continue
		}
		merged = append(merged, b)
	}
	return merged
}

// profileID is a positive 31-bit id from the asset and the window start.
func profileID(assetID string, start time.Time) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(assetID))
	_, _ = h.Write([]byte(start.UTC().Format(time.RFC3339)))
	// In [1, 2³¹−1]: OCPP's integers are 32-bit signed (masking then adding 1 could reach 2³¹).
	return int(h.Sum32()%0x7fffffff) + 1
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Example is GET /examples/ocpp-charging-profile's answer: the profile of a 7.4 kW charger
// plugged in at 22:00 UK time the evening after now, ready by 07:00, charging in the cheapest
// four half-hours of a typical overnight curve (01:00–03:00).
func Example(now time.Time) SetChargingProfileRequest {
	l := now.In(settlement.London)
	plug := time.Date(l.Year(), l.Month(), l.Day()+1, 22, 0, 0, 0, l.Location())
	ready := time.Date(l.Year(), l.Month(), l.Day()+2, 7, 0, 0, 0, l.Location())
	from := time.Date(l.Year(), l.Month(), l.Day()+2, 1, 0, 0, 0, l.Location())
	s := evschedule.Schedule{WindowStart: plug, WindowEnd: ready, Changed: true,
		Blocks: []evschedule.Block{{Start: from, End: from.Add(2 * time.Hour)}}}
	return Profile("example-asset", s, 7400)
}

// Package events holds the rules of push notifications (docs/notifications.md), with no Kubernetes
// client: which events a change makes (a pure function of the object before and after it),
// what identifies them (a digest, so that a redone reconcile writes them once), who an event
// is owed to, when a failed delivery is tried again, and which addresses a delivery may reach.
//
// # Where an event is recorded (one outbox, in PostgreSQL)
//
// Every event is a row of one outbox in PostgreSQL (internal/outboxstore, migration 00014),
// written with the change it reports where the change is in the database, and by the
// controller that observes the change otherwise. Events are computed by the reconcilers from
// their view of status (before and after), never by a door, so a change made through REST,
// kubectl, GitOps, the hosted flow or a catalogue edit makes the same event, and a change
// that changes nothing makes none.
//
//   - rewards.transaction_credited: in the SQL transaction of the credit (internal/rewardstore,
//     internal/settlementstore).
//   - site.eligibility_changed and asset.changed "deleted" (an asset that left the site's
//     evaluation): the Site controller, before its status write.
//   - asset.changed "created" and "updated": the Asset controller, before its status write.
//   - enrolment.changed: the Enrolment controller, before the status write that changes the
//     phase; "removed" by its finalizer, with an id derived from its uid.
//   - site.offboarded: the Site's finalizer, with an id derived from its uid.
//   - dispatch.requested: in the SQL transaction that issues the dispatch
//     (internal/dispatchstore.Issue, called by the FlexEvent controller when the event's
//     dispatches fall due), with an id derived from the dispatch's, so a retry or a racing
//     replica writes nothing new; dispatch.cancelled: in the SQL transaction that cancels it
//     (dispatchstore.Cancel, the FlexEvent's finalizer when it is deleted before its end).
//   - ping: the test endpoint, addressed to its subscription alone.
//
// A controller writes its events in one SQL transaction with a digest of them (Digest) kept
// per object: a reconcile redone after a conflict or a crash computes the same changes and
// finds them written, so an event is written before the status write that shows its change,
// and once. A deletion's event has an id derived from the object's uid, so a finalizer that
// runs again writes nothing new; the object does not wait for its delivery.
//
// Controllers write events only when a subscription of the organisation wants their type (as
// the cache knows it), so an organisation without subscriptions pays nothing; writers in SQL
// always write. Nothing is capped and nothing is dropped: each subscription that wants an
// event gets a delivery row of its own (internal/delivery), retried until delivered or, past
// the retry horizon, given up and counted.
package events

import (
	"encoding/json"
	"slices"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/record"
)

// Change is an event before it is stamped with an id and a time.
type Change struct {
	Type   flexv1.EventType
	SiteID string
	Data   any
}

// EligibilityData is the data of site.eligibility_changed.
type EligibilityData struct {
	SiteID                       string                   `json:"site_id"`
	Eligibility                  *record.Eligibility      `json:"eligibility"`
	PreviousEligiblePropositions []flexv1.PropositionName `json:"previous_eligible_propositions"`
}

// EnrolmentData is the data of enrolment.changed.
type EnrolmentData struct {
	SiteID      string                    `json:"site_id"`
	Proposition flexv1.PropositionName    `json:"proposition"`
	Status      EnrolmentStatus           `json:"status"`
	Issues      []flexv1.EligibilityIssue `json:"issues"`
}

// EnrolmentStatus is enrolment.changed's status.
type EnrolmentStatus string

// The statuses of enrolment.changed.
const (
	EnrolmentActive      EnrolmentStatus = "active"
	EnrolmentNotEligible EnrolmentStatus = "not_eligible"
	EnrolmentWithdrawn   EnrolmentStatus = "withdrawn"
	EnrolmentRemoved     EnrolmentStatus = "removed"
)

// AssetChange is asset.changed's change.
type AssetChange string

// The changes of asset.changed.
const (
	AssetCreated AssetChange = "created"
	AssetUpdated AssetChange = "updated"
	AssetDeleted AssetChange = "deleted"
)

// AssetData is the data of asset.changed.
type AssetData struct {
	SiteID string       `json:"site_id"`
	Asset  record.Asset `json:"asset"`
	Change AssetChange  `json:"change"`
}

// SiteData is the data of site.offboarded.
type SiteData struct {
	SiteID string `json:"site_id"`
}

// SiteEvents are the events of a Site's status going from before to after: its eligibility
// changed (eligible propositions, or any asset's per-proposition result), and assets that
// left its evaluation (deleted). A site never evaluated before counts as eligible for nothing
// with no assets.
func SiteEvents(before, after *flexv1.Site) []Change {
	siteID := after.Labels[flexv1.IDLabel]
	var out []Change
	prevProps, prevAssets := before.Status.EligiblePropositions, before.Status.Assets
	if before.Status.ObservedGeneration < 1 {
		prevProps, prevAssets = nil, nil
	}
	if !slices.Equal(prevProps, after.Status.EligiblePropositions) || !sameResults(prevAssets, after.Status.Assets) {
		res := eligibility.Result{Properties: after.Status.Properties,
			EligiblePropositions: after.Status.EligiblePropositions, Assets: after.Status.Assets}
		out = append(out, Change{Type: flexv1.EventSiteEligibilityChanged, SiteID: siteID, Data: EligibilityData{
			SiteID: siteID, Eligibility: record.EligibilityOf(siteID, res),
			PreviousEligiblePropositions: nonNil(slices.Clone(prevProps))}})
	}
	for _, a := range prevAssets {
		if !slices.ContainsFunc(after.Status.Assets, func(b flexv1.AssetEligibility) bool { return a.Name == b.Name }) {
			out = append(out, Change{Type: flexv1.EventAssetChanged, SiteID: siteID, Data: AssetData{
				SiteID: siteID, Change: AssetDeleted,
				Asset: record.Asset{ID: a.ID, ExternalID: a.ExternalID, SiteID: siteID}}})
		}
	}
	return out
}

// sameResults tells whether two evaluations give every asset the same per-proposition result.
func sameResults(a, b []flexv1.AssetEligibility) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		i := slices.IndexFunc(b, func(y flexv1.AssetEligibility) bool { return y.Name == x.Name })
		if i < 0 || !samePropositions(x.Propositions, b[i].Propositions) {
			return false
		}
	}
	return true
}

func samePropositions(a, b []flexv1.PropositionEligibility) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Proposition != b[i].Proposition || a[i].Eligible != b[i].Eligible || !slices.Equal(a[i].Issues, b[i].Issues) {
			return false
		}
	}
	return true
}

// SiteOffboarded is the event of a site deleted with its assets.
func SiteOffboarded(site *flexv1.Site) Change {
	id := site.Labels[flexv1.IDLabel]
	return Change{Type: flexv1.EventSiteOffboarded, SiteID: id, Data: SiteData{SiteID: id}}
}

// AssetEvents are the events of an Asset's status going from before to after (after has
// the generation the controller is about to record as observed): created when first
// observed, updated when a new generation of its spec is observed or needsReauthorisation
// flipped.
func AssetEvents(before, after *flexv1.Asset, siteID string) []Change {
	var change AssetChange
	switch {
	case before.Status.ObservedGeneration < 1:
		if after.Status.ObservedGeneration < 1 {
			return nil // not observed yet: nothing written, nothing to tell
		}
		change = AssetCreated
	case after.Status.ObservedGeneration != before.Status.ObservedGeneration,
		after.Status.NeedsReauthorisation != before.Status.NeedsReauthorisation:
		change = AssetUpdated
	default:
		return nil
	}
	return []Change{{Type: flexv1.EventAssetChanged, SiteID: siteID,
		Data: AssetData{SiteID: siteID, Asset: record.AssetOf(after, siteID), Change: change}}}
}

// EnrolmentEvents are the events of an Enrolment's phase going from before to after: it
// became active, not eligible or withdrawn (Pending is not news).
func EnrolmentEvents(before, after *flexv1.Enrolment, siteID string) []Change {
	status, ok := enrolmentStatus(after.Status.Phase)
	if !ok || before.Status.Phase == after.Status.Phase {
		return nil
	}
	return []Change{enrolmentChange(after, siteID, status)}
}

// EnrolmentRemovedChange is the event of an Enrolment deleted.
func EnrolmentRemovedChange(enr *flexv1.Enrolment, siteID string) Change {
	return enrolmentChange(enr, siteID, EnrolmentRemoved)
}

func enrolmentChange(enr *flexv1.Enrolment, siteID string, status EnrolmentStatus) Change {
	return Change{Type: flexv1.EventEnrolmentChanged, SiteID: siteID, Data: EnrolmentData{
		SiteID: siteID, Proposition: enr.Spec.Proposition, Status: status,
		Issues: nonNil(slices.Clone(enr.Status.Issues))}}
}

func enrolmentStatus(p flexv1.EnrolmentPhase) (EnrolmentStatus, bool) {
	switch p {
	case flexv1.EnrolmentActive:
		return EnrolmentActive, true
	case flexv1.EnrolmentNotEligible:
		return EnrolmentNotEligible, true
	case flexv1.EnrolmentWithdrawn:
		return EnrolmentWithdrawn, true
	}
	return "", false
}

// TransactionData is the data of rewards.transaction_credited: the site and the transaction
// record's fields.
type TransactionData struct {
	SiteID string `json:"site_id"`
	record.Transaction
}

// Ping is the test endpoint's event.
func Ping() Change { return Change{Type: flexv1.EventPing, Data: struct{}{}} }

// Body is the JSON body delivered for an event: {type, id, timestamp, data}.
func Body(ev *Event) []byte {
	b, _ := json.Marshal(struct {
		Type      flexv1.EventType `json:"type"`
		ID        string           `json:"id"`
		Timestamp string           `json:"timestamp"`
		Data      json.RawMessage  `json:"data"`
	}{ev.Type, ev.ID, ev.Time.UTC().Format("2006-01-02T15:04:05.000000Z07:00"), json.RawMessage(ev.Data)})
	return b
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// Package events holds the rules of push notifications (notifications.md), with no Kubernetes
// client: which events a change makes (a pure function of the object before and after it),
// how an object's outbox records them (bounded, coalesced), who an event is owed to, when a
// failed delivery is tried again, and which addresses a delivery may reach.
//
// # Where an event is recorded (the transactional outbox)
//
// An event is recorded in the status of the object whose change it reports, in the very
// status patch that makes the change visible, so the change and its event are one API-server
// write: either both are stored or neither (a conflict redoes both from fresh state, with a
// new event id). Events are computed by the reconcilers from their view of status (before and
// after), never by a door, so a change made through REST, kubectl, GitOps, the hosted flow or
// a catalogue edit makes the same event, and a change that changes nothing makes none.
//
//   - Site status: site.eligibility_changed, asset.changed "deleted" (the site's evaluation
//     that drops the asset), site.offboarded (written by the site's finalizer).
//   - Asset status: asset.changed "created" and "updated" (the asset controller's write of
//     observedGeneration).
//   - Enrolment status: enrolment.changed (the write that changes the phase).
//   - RewardLedger status: rewards.transaction_credited (the RewardLedger controller's write
//     that moves status.lastCreditedID past the new transactions).
//   - Subscription status: ping (the test endpoint).
//
// Deletions must not lose events. An Enrolment's finalizer hands its undelivered events and
// its enrolment.changed "removed" (with an id derived from its uid, so a retried hand-over
// adds nothing) over to its Site's outbox before it lets the enrolment go: the household
// outlives the enrolment, and an unenrol followed by an enrol is not held up by a slow
// receiver. A Site being deleted records site.offboarded in its own status and keeps its
// finalizer until its outbox is empty, so the API server cannot forget the site, and its
// events, before they are delivered or given up (at most the 24 h retry horizon, and only
// while a subscription wants them: with none, nothing is recorded and nothing is held). Its
// finalizer deletes its children first and waits for them, so their events are handed over,
// and recorded, before site.offboarded. Assets and ledgers have no finalizer: an asset's own
// pending created/updated events go with it (its deletion is recorded by its Site, with the
// record the site knows: id, external id, site id), and so do a ledger's when its site is
// offboarded (site.offboarded follows).
//
// Events are recorded only when a subscription of the namespace wants their type, so an
// organisation without subscriptions pays nothing. An outbox holds at most
// flexv1.MaxPendingEvents events: past that, older site.eligibility_changed events are
// coalesced into the latest (whose data is the full current state), then the oldest events
// are dropped and counted.
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

// CreditedTransactions are a ledger's transactions after the last one told (status
// lastCreditedID; all of them when none was), and the id to remember as told. When the last
// one told is no longer in the ledger (a correction removed it), which transactions are new
// cannot be told: none is, and the ledger's last becomes the mark.
func CreditedTransactions(l *flexv1.RewardLedger) ([]flexv1.RewardTransaction, string) {
	txs := l.Spec.Transactions
	if len(txs) == 0 {
		return nil, l.Status.LastCreditedID
	}
	last := txs[len(txs)-1].ID
	if l.Status.LastCreditedID == "" {
		return txs, last
	}
	i := slices.IndexFunc(txs, func(tx flexv1.RewardTransaction) bool { return tx.ID == l.Status.LastCreditedID })
	if i < 0 {
		return nil, last
	}
	return txs[i+1:], last
}

// LedgerEvents are rewards.transaction_credited events, one per transaction.
func LedgerEvents(txs []flexv1.RewardTransaction, siteID string) []Change {
	out := make([]Change, 0, len(txs))
	for i := range txs {
		out = append(out, Change{Type: flexv1.EventRewardsTransactionCredited, SiteID: siteID,
			Data: TransactionData{SiteID: siteID, Transaction: record.TransactionOf(&txs[i])}})
	}
	return out
}

// Ping is the test endpoint's event.
func Ping() Change { return Change{Type: flexv1.EventPing, Data: struct{}{}} }

// Body is the JSON body delivered for an event: {type, id, timestamp, data}.
func Body(ev *flexv1.PendingEvent) []byte {
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

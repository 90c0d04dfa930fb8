package events

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Wants tells whether a subscription is owed events of type t: not paused, and asking for t
// (an empty list asks for all; ping only comes from the test endpoint, to its subscription).
func Wants(sub *flexv1.Subscription, t flexv1.EventType) bool {
	if sub.Spec.Paused || !sub.DeletionTimestamp.IsZero() {
		return false
	}
	return len(sub.Spec.Events) == 0 || slices.Contains(sub.Spec.Events, t)
}

// AnyWants tells whether one of subs is owed events of type t.
func AnyWants(subs []flexv1.Subscription, t flexv1.EventType) bool {
	return slices.ContainsFunc(subs, func(s flexv1.Subscription) bool { return Wants(&s, t) })
}

// Stamp gives a change its id (a UUIDv7: time-ordered) and time, and encodes its data.
func Stamp(c Change, now time.Time) flexv1.PendingEvent {
	data, err := json.Marshal(c.Data)
	if err != nil {
		data = []byte("{}")
	}
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	return flexv1.PendingEvent{ID: "evt_" + id.String(), Type: c.Type, Time: metav1.NewMicroTime(now.UTC()),
		SiteID: c.SiteID, Data: string(data)}
}

// StampAs is Stamp with a given id: an event that a retried step may record again (a
// finalizer's hand-over) keeps one id, so a receiver told twice can tell.
func StampAs(c Change, id string, now time.Time) flexv1.PendingEvent {
	ev := Stamp(c, now)
	ev.ID = id
	return ev
}

// RemovalID is the id of the event that tells the deletion of the object with uid.
func RemovalID(uid string) string {
	return "evt_" + uuid.NewSHA1(uuid.NameSpaceOID, []byte(uid+"/removed")).String()
}

// HandOver appends to an outbox the events of another (whose object goes) that it does not
// hold yet, in order, keeping it within limit. It answers the outbox, whether it changed and
// how many events it dropped.
func HandOver(outbox, events []flexv1.PendingEvent, limit int) ([]flexv1.PendingEvent, bool, int) {
	out := slices.Clone(outbox)
	changed := false
	for _, ev := range events {
		if !slices.ContainsFunc(out, func(o flexv1.PendingEvent) bool { return o.ID == ev.ID }) {
			out = append(out, ev)
			changed = true
		}
	}
	if !changed {
		return outbox, false, 0
	}
	out, dropped := Bound(out, limit)
	return out, true, dropped
}

// Record appends the changes that one of subs wants to an outbox, stamped with now, keeping
// it within limit (flexv1.MaxPendingEvents when 0): it answers the new outbox and how many
// events it dropped. The outbox passed in is not modified.
func Record(outbox []flexv1.PendingEvent, changes []Change, subs []flexv1.Subscription, now time.Time,
	limit int) ([]flexv1.PendingEvent, int) {
	var out []flexv1.PendingEvent
	for _, c := range changes {
		if !AnyWants(subs, c.Type) {
			continue
		}
		if out == nil {
			out = slices.Clone(outbox)
		}
		out = append(out, Stamp(c, now))
	}
	if out == nil {
		return outbox, 0
	}
	return Bound(out, limit)
}

// Bound keeps an outbox within limit: first a site's older site.eligibility_changed events
// are coalesced, oldest first, into the site's next one (which takes over the removed one's
// previous_eligible_propositions, so the receiver still learns the whole step; its data is
// the full state anyway), never removing a site's latest; then the oldest events are
// dropped. It answers the outbox and the number of events dropped (coalesced events are not
// counted: their news is in a later one).
func Bound(outbox []flexv1.PendingEvent, limit int) ([]flexv1.PendingEvent, int) {
	if limit <= 0 {
		limit = flexv1.MaxPendingEvents
	}
	if len(outbox) <= limit {
		return outbox, 0
	}
	evs := slices.Clone(outbox)
	removed := make([]bool, len(evs))
	excess := len(evs) - limit
	for i := 0; i < len(evs) && excess > 0; i++ {
		if evs[i].Type != flexv1.EventSiteEligibilityChanged {
			continue
		}
		next := -1
		for j := i + 1; j < len(evs); j++ {
			if evs[j].Type == flexv1.EventSiteEligibilityChanged && evs[j].SiteID == evs[i].SiteID {
				next = j
				break
			}
		}
		if next < 0 {
			continue // the site's latest stays
		}
		carryPrevious(&evs[i], &evs[next])
		removed[i] = true
		excess--
	}
	keep := make([]flexv1.PendingEvent, 0, limit)
	for i := range evs {
		if !removed[i] {
			keep = append(keep, evs[i])
		}
	}
	dropped := 0
	if len(keep) > limit {
		dropped = len(keep) - limit
		keep = keep[dropped:]
	}
	return keep, dropped
}

// carryPrevious moves an older eligibility event's previous_eligible_propositions into the
// newer one that replaces it.
func carryPrevious(older, newer *flexv1.PendingEvent) {
	var o, n map[string]json.RawMessage
	if json.Unmarshal([]byte(older.Data), &o) != nil || json.Unmarshal([]byte(newer.Data), &n) != nil {
		return
	}
	if prev, ok := o["previous_eligible_propositions"]; ok {
		n["previous_eligible_propositions"] = prev
		if b, err := json.Marshal(n); err == nil {
			newer.Data = string(b)
		}
	}
}

// Owed lists the names of the subscriptions an event is still owed to: they want its type
// and do not have it yet. An event owed to nobody leaves the outbox.
func Owed(ev *flexv1.PendingEvent, subs []flexv1.Subscription) []string {
	var out []string
	for i := range subs {
		if Wants(&subs[i], ev.Type) && !slices.Contains(ev.DoneFor, subs[i].Name) {
			out = append(out, subs[i].Name)
		}
	}
	return out
}

// Settle marks event id done for subscription sub in an outbox and removes the events that no
// subscription of subs is owed any more. It answers the new outbox and whether it changed.
func Settle(outbox []flexv1.PendingEvent, id, sub string, subs []flexv1.Subscription) ([]flexv1.PendingEvent, bool) {
	changed := false
	out := make([]flexv1.PendingEvent, 0, len(outbox))
	for _, ev := range outbox {
		if ev.ID == id && sub != "" && !slices.Contains(ev.DoneFor, sub) {
			ev.DoneFor = append(slices.Clone(ev.DoneFor), sub)
			changed = true
		}
		if len(Owed(&ev, subs)) == 0 {
			changed = true
			continue
		}
		// Forget subscriptions that no longer exist, so doneFor stays bounded.
		ev.DoneFor = slices.DeleteFunc(slices.Clone(ev.DoneFor), func(n string) bool {
			gone := !slices.ContainsFunc(subs, func(s flexv1.Subscription) bool { return s.Name == n })
			changed = changed || gone
			return gone
		})
		out = append(out, ev)
	}
	return out, changed
}

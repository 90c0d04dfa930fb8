package events

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	"github.com/google/uuid"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Event is one notification as the outbox keeps it and delivers it: its id (the webhook-id,
// the same on every attempt), type, when it happened (orders a site's events, starts the retry
// horizon), the site it is about ("" for ping) and its data, JSON-encoded.
type Event struct {
	ID     string
	Type   flexv1.EventType
	Time   time.Time
	SiteID string
	Data   string
}

// Wants tells whether a subscription is owed events of type t: not paused, and asking for t
// (an empty list asks for all, but an OpenADR subscription's for none; ping only comes from
// the test endpoint, to its subscription).
func Wants(sub *flexv1.Subscription, t flexv1.EventType) bool {
	if sub.Spec.Paused || !sub.DeletionTimestamp.IsZero() {
		return false
	}
	if sub.Spec.IsOpenADR() {
		return slices.Contains(sub.Spec.Events, t)
	}
	return len(sub.Spec.Events) == 0 || slices.Contains(sub.Spec.Events, t)
}

// AnyWants tells whether one of subs is owed events of type t.
func AnyWants(subs []flexv1.Subscription, t flexv1.EventType) bool {
	return slices.ContainsFunc(subs, func(s flexv1.Subscription) bool { return Wants(&s, t) })
}

// Wanted keeps the changes one of subs wants.
func Wanted(changes []Change, subs []flexv1.Subscription) []Change {
	var out []Change
	for _, c := range changes {
		if AnyWants(subs, c.Type) {
			out = append(out, c)
		}
	}
	return out
}

// Stamp gives a change its id (a UUIDv7: time-ordered) and time, and encodes its data.
func Stamp(c Change, now time.Time) Event {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	return StampAs(c, "evt_"+id.String(), now)
}

// StampAs is Stamp with a given id: an event that a retried step may record again (a
// finalizer's) keeps one id, so the outbox holds it once and a receiver told twice can tell.
func StampAs(c Change, id string, now time.Time) Event {
	data, err := json.Marshal(c.Data)
	if err != nil {
		data = []byte("{}")
	}
	return Event{ID: id, Type: c.Type, Time: now.UTC(), SiteID: c.SiteID, Data: string(data)}
}

// RemovalID is the id of the event that tells the deletion of the object with uid.
func RemovalID(uid string) string {
	return "evt_" + uuid.NewSHA1(uuid.NameSpaceOID, []byte(uid+"/removed")).String()
}

// Digest identifies what a list of changes tells (their types and data; not the ids or times
// they will be stamped with): a controller that computes the same changes again (its
// reconcile redone after a conflict or a crash) finds them reported already.
func Digest(changes []Change) string {
	h := sha256.New()
	for _, c := range changes {
		data, _ := json.Marshal(c.Data)
		h.Write([]byte(c.Type))
		h.Write([]byte{0})
		h.Write(data)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

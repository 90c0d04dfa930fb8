package flexevents

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
)

// ErrEventEnded refuses the cancellation of an event whose window has ended: it is settled
// from its readings, and kept.
var ErrEventEnded = app.Fail(app.Conflict, "The flex event has ended: it is settled from the readings and kept")

// Cancel cancels the organisation's event id before its end by deleting it: its FlexEvent's
// dispatch finalizer cancels its open dispatches first (dispatch.cancelled to each asset
// controller), as a deletion with kubectl does (spec/dispatch.md). It answers the event as it
// was. An event that has ended is refused (ErrEventEnded).
func (s *Service) Cancel(ctx context.Context, p *auth.Principal, id string) (EventRecord, error) {
	ev, err := s.event(ctx, p, id)
	if err != nil {
		return EventRecord{}, err
	}
	if !ev.DeletionTimestamp.IsZero() {
		return EventRecord{}, ErrEventNotFound
	}
	if !s.now().Before(ev.Spec.EndAt.Time) {
		return EventRecord{}, ErrEventEnded
	}
	rec, err := s.record(ctx, ev)
	if err != nil {
		return EventRecord{}, err
	}
	// The event read is the one deleted: a name reused since is not.
	if err := s.Client.Delete(ctx, ev, client.Preconditions{UID: &ev.UID}); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return EventRecord{}, ErrEventNotFound
		}
		return EventRecord{}, err
	}
	return rec, nil
}

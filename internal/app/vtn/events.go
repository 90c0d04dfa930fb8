package vtn

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/prices"
)

// ErrEventNotFound answers an event that is not the organisation's, that the caller does not
// see, or that was cancelled (a cancelled event is deleted).
var ErrEventNotFound = app.Fail(app.NotFound, "Event not found")

// Event is one dispatch of a flex event to one asset: what the door answers as an OpenADR
// event (docs/openadr.md, "Events").
type Event struct {
	dispatchstore.Issued
	// Prices are the declared half-hourly prices of the dispatch's market over its window, for
	// events of price_curve (none for the others, and none for a half-hour not declared).
	Prices []prices.Price
}

// Cancelled tells whether the event was cancelled (deleted).
func (e Event) Cancelled() bool { return e.Status == dispatch.Cancelled }

// EventQuery is a search of events: a program (""), the assets named by the search's targets
// (nil: any), and the page.
type EventQuery struct {
	Program     string
	Assets      []string
	Skip, Limit int
}

// SearchEvents answers a page of the events v sees, latest window end first; cancelled ones
// are deleted and answered no more.
func (s *Service) SearchEvents(ctx context.Context, organisation string, v Viewer, q EventQuery) ([]Event, error) {
	assets := q.Assets
	if !v.All {
		if assets == nil {
			assets = slices.Clone(v.Assets)
		} else {
			assets = slices.DeleteFunc(slices.Clone(assets), func(a string) bool { return !v.Holds(a) })
		}
		if assets == nil {
			assets = []string{}
		}
	}
	issued, err := s.dispatches().SearchIssued(ctx, organisation, dispatchstore.IssuedQuery{Proposition: q.Program,
		Assets: assets, Skip: q.Skip, Limit: q.Limit})
	if err != nil {
		return nil, unavailable(err)
	}
	out := make([]Event, 0, len(issued))
	for _, d := range issued {
		e, err := s.withPrices(ctx, organisation, d)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// EventOf answers the organisation's event id as p sees it: ErrEventNotFound when there is
// none, p does not see its asset (SeesAsset), or it was cancelled.
func (s *Service) EventOf(ctx context.Context, p *auth.Principal, id string) (Event, error) {
	e, err := s.AnyEvent(ctx, p.Namespace, id)
	if err != nil {
		return Event{}, err
	}
	if e.Cancelled() {
		return Event{}, ErrEventNotFound
	}
	sees, err := s.SeesAsset(ctx, p, e.AssetID)
	if err != nil {
		return Event{}, err
	}
	if !sees {
		return Event{}, ErrEventNotFound
	}
	return e, nil
}

// AnyEvent answers the organisation's event id whatever its status (a notification of its
// cancellation shapes it too); ErrEventNotFound when there is none.
func (s *Service) AnyEvent(ctx context.Context, organisation, id string) (Event, error) {
	eventID, err := uuid.Parse(id)
	if err != nil || len(id) != 36 {
		return Event{}, ErrEventNotFound
	}
	d, err := s.dispatches().IssuedByID(ctx, organisation, eventID)
	if errors.Is(err, dispatchstore.ErrNotFound) {
		return Event{}, ErrEventNotFound
	}
	if err != nil {
		return Event{}, unavailable(err)
	}
	return s.withPrices(ctx, organisation, d)
}

// withPrices is d as an event, with its market's declared prices over its window when it is
// price_curve's.
func (s *Service) withPrices(ctx context.Context, organisation string, d dispatchstore.Issued) (Event, error) {
	e := Event{Issued: d}
	if d.Proposition != string(flexv1.PropositionPriceCurve) || s.Prices == nil {
		return e, nil
	}
	span, err := s.Prices.Range(ctx, organisation, d.MarketID, d.From, d.To, prices.DayOf(d.From))
	if err != nil {
		return Event{}, unavailable(err)
	}
	e.Prices = span.Prices
	return e, nil
}

// dispatches is the dispatches' store: the dispatch callback's use case's, the database's
// without it (the use case is set by the wiring; the store alone serves reads).
func (s *Service) dispatches() *dispatchstore.Store {
	if s.Dispatches != nil && s.Dispatches.Store != nil {
		return s.Dispatches.Store
	}
	return &dispatchstore.Store{Pool: s.Store.Pool}
}

// unavailable is ErrUnavailable for a database that could not answer now.
func unavailable(err error) error {
	if db.Unavailable(err) {
		return ErrUnavailable
	}
	return err
}

// HalfHour is the length of one interval of an event.
const HalfHour = 30 * time.Minute

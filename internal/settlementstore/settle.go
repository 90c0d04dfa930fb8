package settlementstore

import (
	"context"

	"github.com/flexsite/flexsite/internal/settlement"
)

// Site is one site of an event to settle.
type Site struct {
	Source
	// OtherEventDays are the days of the site's other events known outside the database (the
	// FlexEvents that name it); the windows of its settled events are added.
	OtherEventDays map[settlement.Date]bool
}

// Compute reads a site's readings for the event and the LookbackDays before it and applies
// the rules (settlement.Settle): what the site would be settled at now.
func (s *Store) Compute(ctx context.Context, organisation, eventID string, ev settlement.Event, site Site) (settlement.Result, error) {
	from := ev.Start.AddDate(0, 0, -(settlement.LookbackDays + 2))
	series, err := s.Series(ctx, organisation, site.Source, from, ev.End)
	if err != nil {
		return settlement.Result{}, err
	}
	windows, err := s.SettledWindows(ctx, organisation, site.SiteID, eventID)
	if err != nil {
		return settlement.Result{}, err
	}
	days := EventDays(windows)
	for d := range site.OtherEventDays {
		days[d] = true
	}
	return settlement.Settle(settlement.Input{Event: ev, Energy: series, OtherEventDays: days})
}

// Outcome is what SettleSite did.
type Outcome int

// The outcomes.
const (
	// Pending: the readings do not cover the event yet and its deadline has not passed.
	Pending Outcome = iota
	// Recorded: this call settled (or skipped) the site.
	Recorded
	// Already: the site was settled before (by this replica or another).
	Already
)

// SettleSite settles a site of an event that has ended: now when its readings cover the
// whole window, else only when final (the event's deadline has passed). Exactly once: see
// Settle.
func (s *Store) SettleSite(ctx context.Context, organisation string, ev Event, rules settlement.Event, site Site,
	final bool) (Outcome, error) {
	res, err := s.Compute(ctx, organisation, ev.ID, rules, site)
	if err != nil {
		return Pending, err
	}
	if !final && res.CoveredSeconds < res.WindowSeconds {
		return Pending, nil
	}
	done, err := s.Settle(ctx, organisation, ev, site.SiteID, res)
	switch {
	case err != nil:
		return Pending, err
	case done:
		return Recorded, nil
	}
	return Already, nil
}

// EventOf is what a settlement records of the rules' event.
func EventOf(id string, e settlement.Event) Event {
	return Event{ID: id, Start: e.Start.UTC(), End: e.End.UTC(), RateCentipence: e.RateCentipence}
}

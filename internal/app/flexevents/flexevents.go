// Package flexevents holds the flex event use cases (docs/platform.md, "Flex events", and
// docs/api.md, "Flex events are money"): declaring an organisation's event (a FlexEvent, which the
// FlexEvent controller settles), reading events and their totals, and a site's events with their
// estimated and final revenue and, once settled, the baseline and actual per half-hour, with the
// site's dispatches its devices executed (what the household's rewards page draws and says). It
// speaks no HTTP.
package flexevents

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/settlementstore"
	"github.com/flexsite/flexsite/internal/validation"
)

// Service runs the flex event use cases.
type Service struct {
	// Sites finds the caller's sites (app.Reaches).
	Sites            *app.Service
	Cache, APIReader client.Reader
	Client           client.Client
	// Store is the settlements' database (required), and Dispatches the dispatches' (the same
	// database).
	Store      *settlementstore.Store
	Dispatches *dispatchstore.Store
}

// New builds the flex event use cases on the household ones' clients and the settlements'
// database.
func New(households *app.Service, store *settlementstore.Store) *Service {
	if store == nil {
		panic("flexevents.New: the settlements' store is required")
	}
	return &Service{Sites: households, Cache: households.Cache, APIReader: households.APIReader,
		Client: households.Client, Store: store, Dispatches: &dispatchstore.Store{Pool: store.Pool}}
}

// ErrEventNotFound answers an event that does not exist for this caller.
var ErrEventNotFound = app.Fail(app.NotFound, "Flex event not found or not authorized")

// CreateInput is a flex event to declare, read by the door; Create checks it
// (validation.CheckFlexEvent, the proposition and the sites).
type CreateInput struct {
	Proposition    flexv1.PropositionName
	Start, End     time.Time
	Direction      flexv1.FlexDirection
	RateCentipence int64
	// SiteIDs are the API ids of the caller's sites the event is for; none: every site
	// actively enrolled in the proposition at the start.
	SiteIDs []string
	// Market is the market its dispatches name (the DispatchEvent's market_id); "": the
	// proposition.
	Market string
}

// EventRecord is a flex event as the REST API answers it.
type EventRecord struct {
	ID              string                 `json:"id"`
	Proposition     flexv1.PropositionName `json:"proposition"`
	Market          string                 `json:"market"` // the declared one, or the proposition
	StartAt         string                 `json:"start_at"`
	EndAt           string                 `json:"end_at"`
	Direction       flexv1.FlexDirection   `json:"direction"`
	RatePencePerKWh float64                `json:"rate_pence_per_kwh"`
	SiteIDs         []string               `json:"site_ids"`
	Deadline        string                 `json:"deadline"`
	// Status is "pending" until every site of the event is settled or skipped, then "settled".
	Status       string           `json:"status"`
	SitesSettled int32            `json:"sites_settled"`
	SitesSkipped map[string]int32 `json:"sites_skipped"`
	FlexKWh      float64          `json:"flex_kwh"`
	CreditPence  int64            `json:"credit_pence"`
	LateReadings int64            `json:"late_readings"`
	// Dispatches are the event's dispatches by state and its skipped assets by reason.
	Dispatches DispatchCounts `json:"dispatches"`
}

// DispatchCounts are dispatches by state and skipped assets by reason, as the REST API
// answers them: every state always present, skipped an object ({} when none).
type DispatchCounts struct {
	Issued    int32            `json:"issued"`
	Requested int32            `json:"requested"`
	Received  int32            `json:"received"`
	Accepted  int32            `json:"accepted"`
	Rejected  int32            `json:"rejected"`
	Executed  int32            `json:"executed"`
	Failed    int32            `json:"failed"`
	Cancelled int32            `json:"cancelled"`
	Skipped   map[string]int32 `json:"skipped"`
}

// dispatchCounts are c as answered.
func dispatchCounts(c dispatch.Counts) DispatchCounts {
	out := DispatchCounts{Issued: c.Issued(), Requested: c.ByStatus[dispatch.Requested], Received: c.ByStatus[dispatch.Received],
		Accepted: c.ByStatus[dispatch.Accepted], Rejected: c.ByStatus[dispatch.Rejected], Executed: c.ByStatus[dispatch.Executed],
		Failed: c.ByStatus[dispatch.Failed], Cancelled: c.ByStatus[dispatch.Cancelled], Skipped: map[string]int32{}}
	for reason, n := range c.Skipped {
		out.Skipped[string(reason)] = n
	}
	return out
}

// ErrDispatchesUnavailable answers a read whose dispatch counts the database could not give now.
var ErrDispatchesUnavailable = &app.Error{Kind: app.Unavailable,
	Detail: "The dispatch store is unavailable; try again shortly", RetryAfter: db.RetryAfterSeconds}

// countsOf are the dispatch counts of an organisation's events, in one query.
func (s *Service) countsOf(ctx context.Context, organisation string, events []string) (map[string]dispatch.Counts, error) {
	counts, err := s.Dispatches.CountsOf(ctx, organisation, events)
	return counts, dispatchesErr(err)
}

func dispatchesErr(err error) error {
	if db.Unavailable(err) {
		return ErrDispatchesUnavailable
	}
	return err
}

// EventList is the organisation's events, newest first.
type EventList struct {
	Events []EventRecord `json:"events"`
}

// restFlexFields are the REST API's names of a flex event's parts.
var restFlexFields = map[validation.FlexField]string{
	validation.FlexStartField: "start_at", validation.FlexEndField: "end_at", validation.FlexDirectionField: "direction",
	validation.FlexRateField: "rate_pence_per_kwh", validation.FlexDeadlineField: "deadline",
}

// Create declares a flex event. A window, direction or rate that breaks the event's rules
// (validation.CheckFlexEvent: among them a start more than validation.MaxFlexBackdate ago),
// an unknown proposition or site, or a rate above the organisation's maximum is refused (422)
// on its field: an event is a cause of credits, and each bound keeps what it can pay bounded.
func (s *Service) Create(ctx context.Context, p *auth.Principal, in CreateInput) (EventRecord, error) {
	var problems []app.FieldError
	field := func(err error, loc ...any) {
		var ve *validation.Error
		if errors.As(err, &ve) {
			problems = append(problems, app.Field(ve.Msg, ve.Type, loc...))
		}
	}
	for _, problem := range validation.CheckFlexEvent(validation.FlexEvent{Start: in.Start, End: in.End,
		Direction: string(in.Direction), RateCentipence: in.RateCentipence, DeclaredAt: s.now()}) {
		field(problem.Err, "body", restFlexFields[problem.Field])
	}
	maxRate, err := householdstore.MaxFlexRate(ctx, s.Cache, s.APIReader, p.Namespace)
	if err != nil {
		return EventRecord{}, err
	}
	field(validation.FlexRateAtMost(in.RateCentipence, maxRate), "body", "rate_pence_per_kwh")
	prop := &flexv1.Proposition{}
	err = s.Cache.Get(ctx, types.NamespacedName{Name: identity.PropositionObjectName(in.Proposition)}, prop)
	if apierrors.IsNotFound(err) {
		err = s.APIReader.Get(ctx, types.NamespacedName{Name: identity.PropositionObjectName(in.Proposition)}, prop)
	}
	switch {
	case apierrors.IsNotFound(err):
		problems = append(problems, app.Field("The proposition is not offered", "value_error", "body", "proposition"))
	case err != nil:
		return EventRecord{}, err
	}
	var names []string
	unlisted := 0
	// The sites from the cache alone: a thousand unknown ids cost no API-server call.
	for i, id := range in.SiteIDs {
		site, err := s.Sites.SiteInCache(ctx, p, id)
		if e := app.As(err); e != nil && e.Kind == app.NotFound {
			if len(problems) < app.MaxListed {
				problems = append(problems, app.Field("Site not found or not authorized", "value_error", "body", "site_ids", i))
			} else {
				unlisted++
			}
			continue
		}
		if err != nil {
			return EventRecord{}, err
		}
		if !slices.Contains(names, site.Name) {
			names = append(names, site.Name)
		}
	}
	if unlisted > 0 {
		problems = append(problems, app.Unlisted(unlisted, "unknown sites", "body", "site_ids"))
	}
	if len(problems) > 0 {
		return EventRecord{}, app.InvalidFields(problems...)
	}
	ev := &flexv1.FlexEvent{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: uuid.NewString()},
		Spec: flexv1.FlexEventSpec{Proposition: in.Proposition, StartAt: metav1.NewTime(in.Start.UTC()),
			EndAt: metav1.NewTime(in.End.UTC()), Direction: in.Direction,
			RatePencePerKWh: validation.FormatFlexRate(in.RateCentipence), SiteNames: names, Market: in.Market},
	}
	if err := s.Client.Create(ctx, ev); err != nil {
		return EventRecord{}, err
	}
	rec, err := s.record(ctx, ev)
	rec.Dispatches = dispatchCounts(dispatch.Counts{}) // none issued before the controller sees it
	return rec, err
}

// List is the organisation's events, newest start first.
func (s *Service) List(ctx context.Context, p *auth.Principal) (EventList, error) {
	list := &flexv1.FlexEventList{}
	if err := s.Cache.List(ctx, list, client.InNamespace(p.Namespace)); err != nil {
		return EventList{}, err
	}
	slices.SortFunc(list.Items, func(a, b flexv1.FlexEvent) int {
		if c := b.Spec.StartAt.Compare(a.Spec.StartAt.Time); c != 0 {
			return c
		}
		return compareStrings(a.Name, b.Name)
	})
	names := make([]string, len(list.Items))
	for i := range list.Items {
		names[i] = list.Items[i].Name
	}
	counts, err := s.countsOf(ctx, p.Namespace, names)
	if err != nil {
		return EventList{}, err
	}
	out := EventList{Events: make([]EventRecord, 0, len(list.Items))}
	for i := range list.Items {
		rec, err := s.record(ctx, &list.Items[i])
		if err != nil {
			return EventList{}, err
		}
		rec.Dispatches = dispatchCounts(counts[rec.ID])
		out.Events = append(out.Events, rec)
	}
	return out, nil
}

// now is the clock of the household use cases (tests replace it).
func (s *Service) now() time.Time {
	if s.Sites != nil && s.Sites.Now != nil {
		return s.Sites.Now()
	}
	return time.Now()
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Get is the organisation's event id.
func (s *Service) Get(ctx context.Context, p *auth.Principal, id string) (EventRecord, error) {
	ev, err := s.event(ctx, p, id)
	if err != nil {
		return EventRecord{}, err
	}
	counts, err := s.countsOf(ctx, p.Namespace, []string{ev.Name})
	if err != nil {
		return EventRecord{}, err
	}
	rec, err := s.record(ctx, ev)
	rec.Dispatches = dispatchCounts(counts[ev.Name])
	return rec, err
}

func (s *Service) event(ctx context.Context, p *auth.Principal, id string) (*flexv1.FlexEvent, error) {
	if p.Kind == auth.KindEndUser || id == "" || len(id) > 253 {
		return nil, ErrEventNotFound
	}
	ev := &flexv1.FlexEvent{}
	err := s.Cache.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: id}, ev)
	if apierrors.IsNotFound(err) {
		err = s.APIReader.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: id}, ev)
	}
	if apierrors.IsNotFound(err) {
		return nil, ErrEventNotFound
	}
	return ev, err
}

// record is an event as answered: its spec, and its totals from its status.
func (s *Service) record(ctx context.Context, ev *flexv1.FlexEvent) (EventRecord, error) {
	rate, _ := validation.ParseFlexRate(ev.Spec.RatePencePerKWh)
	rec := EventRecord{ID: ev.Name, Proposition: ev.Spec.Proposition, Market: ev.Spec.MarketOrDefault(), StartAt: stamp(ev.Spec.StartAt.Time),
		EndAt: stamp(ev.Spec.EndAt.Time), Direction: ev.Spec.Direction, RatePencePerKWh: float64(rate) / 100,
		SiteIDs: []string{}, Deadline: stamp(ev.Spec.DeadlineOrDefault()), Status: "pending",
		SitesSettled: ev.Status.SitesSettled, SitesSkipped: map[string]int32{},
		FlexKWh: float64(ev.Status.FlexWh) / 1000, CreditPence: ev.Status.CreditPence, LateReadings: ev.Status.LateReadings}
	for _, sk := range ev.Status.SitesSkipped {
		rec.SitesSkipped[string(sk.Reason)] = sk.Sites
	}
	ready := meta.FindStatusCondition(ev.Status.Conditions, flexv1.ReadyCondition)
	if ready != nil && ready.Status == metav1.ConditionTrue && ready.ObservedGeneration == ev.Generation {
		rec.Status = "settled"
	}
	for _, name := range ev.Spec.SiteNames {
		site := &flexv1.Site{}
		err := s.Cache.Get(ctx, types.NamespacedName{Namespace: ev.Namespace, Name: name}, site)
		switch {
		case err == nil && site.Labels[flexv1.IDLabel] != "":
			rec.SiteIDs = append(rec.SiteIDs, site.Labels[flexv1.IDLabel])
		case err == nil || apierrors.IsNotFound(err):
			rec.SiteIDs = append(rec.SiteIDs, name)
		default:
			return EventRecord{}, err
		}
	}
	return rec, nil
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// SiteEvent is one of a site's flex events: prod's FlexEventResponse and Flexsite's own
// fields (the REST API's answer), and for the rewards page the settlement's half-hours.
type SiteEvent struct {
	ID                       string   `json:"id"`
	StartAt                  string   `json:"start_at"`
	EndAt                    string   `json:"end_at"`
	EstimatedGrossRevenueGBP float64  `json:"estimated_gross_revenue_gbp"`
	FinalGrossRevenueGBP     *float64 `json:"final_gross_revenue_gbp,omitempty"`
	// FlexKWh is actual − baseline (positive: more import than usual); null until settled.
	FlexKWh     *float64 `json:"flex_kwh"`
	CreditPence int64    `json:"credit_pence"`
	// Status is pending, settled or skipped; Reason why it was skipped.
	Status string  `json:"status"`
	Reason *string `json:"reason"`
	// Dispatches are this site's share of the event's dispatches and skipped assets.
	Dispatches DispatchCounts `json:"dispatches"`

	// Start, End and HalfHours are the settlement's, for the rewards page (not in the API).
	Start, End time.Time                  `json:"-"`
	HalfHours  []settlementstore.HalfHour `json:"-"`
	// Executed are the event's dispatches to the site's devices that their controller reported
	// executed, for the rewards page (not in the API). Only executed ones: what a device was
	// asked and did. Settlement stays measured, so they change nothing in money.
	Executed []ExecutedDispatch `json:"-"`
}

// ExecutedDispatch is an executed dispatch of a flex event to one of the site's devices.
type ExecutedDispatch struct {
	AssetID string
	// AssetType is the asset's type; "" for an asset deleted since.
	AssetType flexv1.AssetType
	// LevelKW is the power output it was asked for (the DispatchEvent's level_kw), over From–To.
	LevelKW  float64
	From, To time.Time
	// Ongoing: the window had not ended when the events were read (the page says what the
	// device is doing, not what it did).
	Ongoing bool
}

// maxExecutedShown bounds the executed dispatches read for a site's events: a household has a
// few devices, and the newest windows are read first.
const maxExecutedShown = 1000

// SiteEvents answers GET /entities/site/{site_id}/flex-events: prod's SiteFlexEventsResponse.
type SiteEvents struct {
	SiteID string      `json:"site_id"`
	Events []SiteEvent `json:"events"`
}

// ForSite are the site's flex events, newest first: settled or skipped ones from their
// settlement, pending ones (started, not yet settled) with the revenue the readings so far
// would earn.
func (s *Service) ForSite(ctx context.Context, p *auth.Principal, siteID string) (SiteEvents, error) {
	site, err := s.Sites.SiteToRead(ctx, p, siteID)
	if err != nil {
		return SiteEvents{}, err
	}
	return s.OfSite(ctx, site, time.Now())
}

// OfSite are a site's flex events (the site already found for its caller), judged at now.
func (s *Service) OfSite(ctx context.Context, site *flexv1.Site, now time.Time) (SiteEvents, error) {
	id := site.Labels[flexv1.IDLabel]
	if id == "" {
		id = site.Name
	}
	out := SiteEvents{SiteID: id, Events: []SiteEvent{}}
	settled, err := s.Store.OfSite(ctx, site.Namespace, id)
	if err != nil {
		return SiteEvents{}, err
	}
	seen := map[string]bool{}
	for _, st := range settled {
		seen[st.EventID] = true
		out.Events = append(out.Events, settledEvent(st))
	}
	pending, err := s.pending(ctx, site, id, seen, now)
	if err != nil {
		return SiteEvents{}, err
	}
	out.Events = append(out.Events, pending...)
	counts, err := s.Dispatches.CountsOfSite(ctx, site.Namespace, id)
	if err != nil {
		return SiteEvents{}, dispatchesErr(err)
	}
	for i := range out.Events {
		out.Events[i].Dispatches = dispatchCounts(counts[out.Events[i].ID])
	}
	slices.SortStableFunc(out.Events, func(a, b SiteEvent) int { return b.Start.Compare(a.Start) })
	if err := s.withExecuted(ctx, site.Namespace, id, out.Events, now); err != nil {
		return SiteEvents{}, err
	}
	return out, nil
}

// withExecuted gives each of the site's events its executed dispatches whose window has
// started by now (one reported executed ahead of its window, before reports were judged
// against it, says nothing yet), each with its asset's type from the cache (one index lookup
// per asset).
func (s *Service) withExecuted(ctx context.Context, organisation, siteID string, events []SiteEvent, now time.Time) error {
	if s.Dispatches == nil || len(events) == 0 {
		return nil
	}
	executed, err := s.Dispatches.ExecutedOfSite(ctx, organisation, siteID, maxExecutedShown)
	if err != nil || len(executed) == 0 {
		return err
	}
	ids := make([]string, 0, len(executed))
	for _, e := range executed {
		ids = append(ids, e.AssetID)
	}
	assetTypes, err := householdstore.AssetTypes(ctx, s.Cache, organisation, ids)
	if err != nil {
		return err
	}
	byEvent := map[string][]ExecutedDispatch{}
	for _, e := range executed {
		if e.From.After(now) {
			continue
		}
		byEvent[e.FlexEvent] = append(byEvent[e.FlexEvent], ExecutedDispatch{AssetID: e.AssetID,
			AssetType: assetTypes[e.AssetID], LevelKW: e.LevelKW, From: e.From, To: e.To, Ongoing: now.Before(e.To)})
	}
	for i := range events {
		events[i].Executed = byEvent[events[i].ID]
	}
	return nil
}

func settledEvent(st settlementstore.Settlement) SiteEvent {
	ev := SiteEvent{ID: st.EventID, StartAt: stamp(st.Start), EndAt: stamp(st.End), Status: string(st.Status),
		Start: st.Start, End: st.End, HalfHours: st.HalfHours}
	if st.Status == settlement.Settled {
		gbp := pounds(st.CreditPence)
		kwh := float64(st.FlexWh) / 1000
		ev.EstimatedGrossRevenueGBP, ev.FinalGrossRevenueGBP, ev.FlexKWh, ev.CreditPence = gbp, &gbp, &kwh, st.CreditPence
	} else {
		zero := 0.0
		reason := string(st.Reason)
		ev.FinalGrossRevenueGBP, ev.Reason = &zero, &reason
	}
	return ev
}

func pounds(pence int64) float64 { return math.Round(float64(pence)) / 100 }

// pending are the site's started events not settled for it yet, with their estimates.
func (s *Service) pending(ctx context.Context, site *flexv1.Site, id string, seen map[string]bool, now time.Time) ([]SiteEvent, error) {
	list := &flexv1.FlexEventList{}
	if err := s.Cache.List(ctx, list, client.InNamespace(site.Namespace)); err != nil {
		return nil, err
	}
	var out []SiteEvent
	for i := range list.Items {
		ev := &list.Items[i]
		if seen[ev.Name] || now.Before(ev.Spec.StartAt.Time) {
			continue
		}
		target, err := s.targets(ctx, ev, site)
		if err != nil {
			return nil, err
		}
		if !target {
			continue
		}
		rate, err := validation.ParseFlexRate(ev.Spec.RatePencePerKWh)
		if err != nil {
			continue
		}
		boundary, err := householdstore.BoundaryMeterIDs(ctx, s.Cache, site.Namespace, site.Name)
		if err != nil {
			return nil, err
		}
		rated, err := householdstore.RatedPowerW(ctx, s.Cache, site.Namespace, site.Name)
		if err != nil {
			return nil, err
		}
		rules := settlement.Event{Start: ev.Spec.StartAt.UTC(), End: ev.Spec.EndAt.UTC(),
			Direction: settlement.Direction(ev.Spec.Direction), RateCentipence: rate}
		res, err := s.Store.Compute(ctx, site.Namespace, ev.Name, rules,
			settlementstore.Site{Source: settlementstore.Source{SiteID: id, BoundaryAssetIDs: boundary}, RatedPowerW: rated})
		if err != nil {
			return nil, err
		}
		out = append(out, SiteEvent{ID: ev.Name, StartAt: stamp(rules.Start), EndAt: stamp(rules.End),
			EstimatedGrossRevenueGBP: pounds(res.EstimatedCreditPence), Status: "pending",
			Start: rules.Start, End: rules.End})
	}
	return out, nil
}

// targets reports whether the event is for the site: listed, or (listing none) the site
// has an enrolment in its proposition active since before its start.
func (s *Service) targets(ctx context.Context, ev *flexv1.FlexEvent, site *flexv1.Site) (bool, error) {
	if len(ev.Spec.SiteNames) > 0 {
		return slices.Contains(ev.Spec.SiteNames, site.Name), nil
	}
	enr := &flexv1.Enrolment{}
	err := s.Cache.Get(ctx, types.NamespacedName{Namespace: site.Namespace,
		Name: identity.EnrolmentName(site.Name, ev.Spec.Proposition)}, enr)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return household.TakesPartIn(enr, ev.Spec.Proposition, ev.Spec.StartAt.Time), nil
}

package vtn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/dispatches"
	"github.com/flexsite/flexsite/internal/app/readings"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/vtnstore"
)

// MaxReportsPerEvent bounds the reports one API client keeps of one event (docs/openadr.md,
// "Limits"): a report past it is a conflict (409).
const MaxReportsPerEvent = 200

// Report is a report as stored.
type Report = vtnstore.Report

// The operating states of the Definition's table (docs/openadr.md, "What a report does").
var OperatingStates = []string{"NORMAL", "ERROR", "IDLE_NORMAL", "RUNNING_NORMAL", "RUNNING_CURTAILED",
	"RUNNING_HEIGHTENED", "IDLE_CURTAILED", "SGD_ERROR_CONDITION", "IDLE_HEIGHTENED", "IDLE_OPTED_OUT", "RUNNING_OPTED_OUT"}

// ReportInput is a report as the door read it.
type ReportInput struct {
	ProgramID, EventID, ClientName, Name string
	// Body is the report's payloadDescriptors and resources as the door answers them back.
	Body json.RawMessage
	// Resources are what the report says of each resource, in the report's order.
	Resources []ReportedResource
}

// ReportedResource is what a report says of one resource.
type ReportedResource struct {
	// Name is the resourceName; Index its place in the report (for refusals).
	Name  string
	Index int
	// States are its OPERATING_STATE values, in the report's order.
	States []ReportedState
	// Usage are its USAGE intervals.
	Usage []ReportedUsage
}

// ReportedState is one OPERATING_STATE value; Loc is where it is in the body.
type ReportedState struct {
	State string
	Loc   []any
}

// ReportedUsage is one USAGE interval: the energy used over [Start, End), in kWh.
type ReportedUsage struct {
	Start, End time.Time
	KWh        float64
	Loc        []any
}

// ErrReportedEventNotFound answers a report on an event the caller does not see: none of that id,
// another organisation's, or (to a VEN client) one that targets no resource its VENs hold. It
// is the report's field at fault (the document answers a report's creation 400, never 404).
var ErrReportedEventNotFound = app.InvalidFields(app.Field("eventID names no event the client sees", "value_error", "body", "eventID"))

// ErrReportNotFound answers a report the caller does not see.
var ErrReportNotFound = app.Fail(app.NotFound, "Report not found")

// statusOf is what an operating state reported at now says of a dispatch whose window
// starts at start (docs/openadr.md, "What a report does"): opted out is REJECTED, an error
// FAILED, anything before the window ACCEPTED, curtailed or heightened from the window's
// start EXECUTED; a normal state from the window's start says nothing (ok false).
func statusOf(state string, now, start time.Time) (dispatch.Status, bool) {
	before, started := statusesOf(state)
	if now.Before(start) {
		return before, true
	}
	return started, started != ""
}

// statusesOf is what an operating state says of a dispatch (statusOf) before its window
// starts, and from its start (empty: nothing).
func statusesOf(state string) (before, started dispatch.Status) {
	switch state {
	case "IDLE_OPTED_OUT", "RUNNING_OPTED_OUT":
		return dispatch.Rejected, dispatch.Rejected
	case "ERROR", "SGD_ERROR_CONDITION":
		return dispatch.Failed, dispatch.Failed
	case "RUNNING_CURTAILED", "IDLE_CURTAILED", "RUNNING_HEIGHTENED", "IDLE_HEIGHTENED":
		return dispatch.Accepted, dispatch.Executed
	}
	return dispatch.Accepted, ""
}

// usageLabel is the reading a resource's USAGE (kWh in an interval) is stored as, by its
// asset's type, and whether the value is the interval's average power (kW) rather than its
// energy; ok false for an asset whose type measures no energy.
func usageLabel(t flexv1.AssetType) (label settlement.Label, power bool, ok bool) {
	switch t {
	case flexv1.AssetTypeCharger, flexv1.AssetTypeElectricVehicle:
		return settlement.ChargerConsumptionEnergyKWh, false, true
	case flexv1.AssetTypeBattery:
		return settlement.BatteryInverterImportKW, true, true
	case flexv1.AssetTypeBoundaryMeter:
		return settlement.BoundaryImportKW, true, true
	case flexv1.AssetTypeHeatPump, flexv1.AssetTypeHotWaterTank:
		return settlement.ProvisionalConsumptionKWh, false, true
	}
	return "", false, false
}

// judged is a report judged and ready to take effect.
type judged struct {
	dispatch dispatchstore.Stored
	statuses []dispatch.Status
	readings []readings.Reading
}

// judge judges a report of p's on everything but the store's bound, writing nothing: the
// event must be a dispatch p sees (404), every resource its asset (400), programID its
// proposition (400); the statuses its states say must follow the dispatch's (409, as the
// dispatch callback refuses them); its USAGE readings must pass the readings' rules (400).
func (s *Service) judge(ctx context.Context, p *auth.Principal, in ReportInput) (judged, error) {
	eventID, err := uuid.Parse(in.EventID)
	if err != nil {
		return judged{}, ErrReportedEventNotFound
	}
	// A VEN client reports only on what its VENs hold (what Viewer.Holds tells), asked of the
	// dispatch's one asset, in the statement that reads the dispatch.
	var holder *string
	column := ""
	if !BusinessLogic(p) {
		column = vtnstore.HolderColumn("d.organisation", "d.asset_id")
	}
	d, err := s.Dispatches.Store.OfAnd(ctx, p.Namespace, eventID, column, &holder)
	if errors.Is(err, dispatchstore.ErrNotFound) {
		return judged{}, ErrReportedEventNotFound
	}
	if err != nil {
		return judged{}, failed(err, ErrReportedEventNotFound)
	}
	if !BusinessLogic(p) && (holder == nil || *holder != p.ClientName) {
		return judged{}, ErrReportedEventNotFound
	}
	ev := &flexv1.FlexEvent{}
	err = s.Households.Cache.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: d.FlexEvent}, ev)
	switch {
	case err == nil:
		if in.ProgramID != string(ev.Spec.Proposition) {
			return judged{}, app.InvalidFields(app.Field(fmt.Sprintf("programID must be the event's program, %s",
				ev.Spec.Proposition), "value_error", "body", "programID"))
		}
	case !apierrors.IsNotFound(err):
		return judged{}, err
	}
	now := s.Now()
	j := judged{dispatch: d}
	from := d.Status
	var usage []ReportedUsage
	for _, r := range in.Resources {
		if r.Name != d.AssetID {
			return judged{}, app.InvalidFields(app.Field(fmt.Sprintf("resourceName must be the event's resource, %s", d.AssetID),
				"value_error", "body", "resources", r.Index, "resourceName"))
		}
		for _, st := range r.States {
			if !slices.Contains(OperatingStates, st.State) {
				return judged{}, app.InvalidFields(app.Field("OPERATING_STATE must be one of the Definition's operating states",
					"enum", st.Loc...))
			}
			to, ok := statusOf(st.State, now, d.From)
			if !ok {
				continue
			}
			if j, err = step(j, from, to, now); err != nil {
				return judged{}, err
			}
			if len(j.statuses) > 0 {
				from = j.statuses[len(j.statuses)-1]
			}
		}
		usage = append(usage, r.Usage...)
	}
	// Any report on the event before its window says the VEN has it: ACCEPTED.
	if len(j.statuses) == 0 && now.Before(d.From) {
		if j, err = step(j, from, dispatch.Accepted, now); err != nil {
			return judged{}, err
		}
	}
	if len(usage) > 0 {
		if j.readings, err = s.usage(ctx, p, d.AssetID, usage); err != nil {
			return judged{}, err
		}
	}
	return j, nil
}

// step judges a status after from with the dispatch callback's state machine, adding it to j's.
func step(j judged, from, to dispatch.Status, now time.Time) (judged, error) {
	changed, err := dispatch.Judge(from, to, now, now, j.dispatch.From)
	if err != nil {
		msg := err.Error()
		return judged{}, app.Fail(app.Conflict, "Refused: the report says %s: %s", dispatches.EventStatus(to), msg)
	}
	if changed {
		j.statuses = append(j.statuses, to)
	}
	return j, nil
}

// usage is the USAGE intervals as readings of the asset, judged by the readings' rules.
func (s *Service) usage(ctx context.Context, p *auth.Principal, assetID string, usage []ReportedUsage) ([]readings.Reading, error) {
	a, err := s.Households.FindAsset(ctx, p, assetID, false)
	if err != nil {
		return nil, err
	}
	label, power, ok := usageLabel(a.Spec.Type)
	if !ok {
		return nil, app.InvalidFields(app.Field(fmt.Sprintf("USAGE cannot be reported of a %s: it measures no energy", a.Spec.Type),
			"value_error", usage[0].Loc...))
	}
	out := make([]readings.Reading, len(usage))
	for i, u := range usage {
		hours := u.End.Sub(u.Start).Hours()
		if hours <= 0 || u.End.Sub(u.Start) > settlement.MaxInterval {
			return nil, app.InvalidFields(app.Field(fmt.Sprintf("a USAGE interval lasts more than nothing and at most %s",
				settlement.MaxInterval), "value_error", u.Loc...))
		}
		v := u.KWh
		if power {
			v = u.KWh / hours
		}
		out[i] = readings.Reading{AssetID: assetID, Label: label, Start: u.Start, End: u.End, Value: v}
	}
	outcomes, err := s.Readings.Check(ctx, p, out)
	if err != nil {
		return nil, err
	}
	for i, o := range outcomes {
		if !o.Accepted {
			return nil, app.InvalidFields(app.Field("USAGE refused: "+o.Error, "value_error", usage[i].Loc...))
		}
	}
	return out, nil
}

// apply records what a judged report says: the dispatch's statuses through the dispatch
// callback's use case, then its readings through the readings' use case. Both are
// idempotent (the same status again changes nothing, a reading sent again replaces itself):
// a report that fails half-way and is sent again takes effect once.
func (s *Service) apply(ctx context.Context, p *auth.Principal, j judged) error {
	now := s.Now()
	for _, st := range j.statuses {
		if _, err := s.Dispatches.Callback(ctx, p, dispatches.CallbackInput{Asset: j.dispatch.AssetID,
			EventID: j.dispatch.EventID.String(), Status: st, At: now}); err != nil {
			return err
		}
	}
	if len(j.readings) > 0 {
		if _, err := s.Readings.Ingest(ctx, p, j.readings); err != nil {
			return err
		}
	}
	return nil
}

// CreateReport judges p's report (judge), makes it take effect and stores it, sent by p's
// client. Nothing is written when it is refused. The statuses it says are written in the
// transaction that stores it (the store's bound counted there too), so a report and the
// change it made commit together; its USAGE readings, idempotent, go first, after the bound
// was checked. A report of one resource and at most one operating state (the common one) is
// first tried in one statement that judges and writes it whole (quickReport); one that
// statement does not take is judged and written as any other.
func (s *Service) CreateReport(ctx context.Context, p *auth.Principal, in ReportInput) (Report, error) {
	if err := organisationOnly(p); err != nil {
		return Report{}, err
	}
	now := s.stamp()
	r := Report{ID: newID(), ClientName: p.ClientName, ProgramID: in.ProgramID, EventID: in.EventID,
		ReportClientName: in.ClientName, Name: in.Name, Body: in.Body, Created: now, Modified: now}
	if taken, err := s.quickReport(ctx, p, in, r); taken || err != nil {
		return r, err
	}
	j, err := s.judge(ctx, p, in)
	if err != nil {
		return Report{}, err
	}
	if len(j.readings) > 0 {
		n, err := s.Store.CountReports(ctx, p.Namespace, p.ClientName, in.EventID, MaxReportsPerEvent)
		if err != nil {
			return Report{}, failed(err, ErrReportNotFound)
		}
		if n >= MaxReportsPerEvent {
			return Report{}, reportsFull()
		}
		if _, err := s.Readings.Ingest(ctx, p, j.readings); err != nil {
			return Report{}, err
		}
	}
	var committed []func()
	switch len(j.statuses) {
	case 0:
		err = s.Store.CreateReport(ctx, p.Namespace, r, MaxReportsPerEvent, nil)
	case 1:
		// The one status and the counted report in one statement (the bound checked and
		// counted on the dispatch's row in it): one round trip, committed together or not at all.
		var done func()
		_, done, err = s.Dispatches.CallbackJoined(ctx, s.Store.Pool, p,
			dispatches.CallbackInput{Asset: j.dispatch.AssetID, EventID: j.dispatch.EventID.String(),
				Status: j.statuses[0], At: s.Now()},
			dispatchstore.Joined{Statement: reportJoined, Args: vtnstore.ReportJoin(p.Namespace, r, MaxReportsPerEvent)})
		if errors.Is(err, dispatchstore.ErrClosed) {
			err = vtnstore.ErrFull
		}
		if done != nil {
			committed = append(committed, done)
		}
	default:
		err = s.Store.CreateReport(ctx, p.Namespace, r, MaxReportsPerEvent, func(q vtnstore.Querier) error {
			at := s.Now()
			for _, st := range j.statuses {
				_, done, err := s.Dispatches.CallbackOn(ctx, q, p, dispatches.CallbackInput{Asset: j.dispatch.AssetID,
					EventID: j.dispatch.EventID.String(), Status: st, At: at})
				if err != nil {
					return err
				}
				committed = append(committed, done)
			}
			return nil
		})
	}
	if errors.Is(err, vtnstore.ErrFull) {
		return Report{}, reportsFull()
	}
	if err != nil {
		return Report{}, failed(err, ErrReportNotFound)
	}
	for _, done := range committed {
		done()
	}
	return r, nil
}

// quickReport writes r, p's report in, in one statement that judges it as judge would and
// writes it only when judge would take it: the dispatch's status by the dispatch callback's
// use case (CallbackJoined), its asset the one resource the report names, held by p's client
// (a VEN client's), its proposition the report's programID, the status its operating state
// says of the dispatch's window as it stands (statusesOf: the statement reads which), and the
// report counted within the bound, all in one implicit transaction. It answers taken false,
// having written nothing, for a report it cannot judge so (USAGE, more than one resource or
// state, a state not of the Definition) or one the statement did not take (a refusal, or a
// status the state machine does not follow): judge and CreateReport's other writes answer
// those, each with its refusal. A database away is ErrUnavailable.
func (s *Service) quickReport(ctx context.Context, p *auth.Principal, in ReportInput, r Report) (taken bool, err error) {
	if len(in.Resources) == 0 {
		return false, nil
	}
	asset := in.Resources[0].Name
	var states []ReportedState
	for _, res := range in.Resources {
		if res.Name != asset || len(res.Usage) > 0 {
			return false, nil
		}
		states = append(states, res.States...)
	}
	before, started := dispatch.Accepted, dispatch.Status("") // a report of no state (judge)
	switch {
	case len(states) > 1:
		return false, nil
	case len(states) == 1:
		if !slices.Contains(OperatingStates, states[0].State) {
			return false, nil
		}
		before, started = statusesOf(states[0].State)
	}
	statement := reportJoined
	if !BusinessLogic(p) {
		statement = reportJoinedHeld
	}
	_, done, err := s.Dispatches.CallbackJoined(ctx, s.Store.Pool, p,
		dispatches.CallbackInput{Asset: asset, EventID: in.EventID, Status: before, Windowed: true, Started: started,
			At: s.Now()},
		dispatchstore.Joined{Statement: statement, Args: vtnstore.ReportJoin(p.Namespace, r, MaxReportsPerEvent),
			Program: in.ProgramID})
	switch {
	case err == nil:
		done()
		return true, nil
	case errors.Is(err, dispatches.ErrUnavailable):
		return false, ErrUnavailable
	}
	var refusal *app.Error
	if errors.Is(err, dispatchstore.ErrClosed) || errors.As(err, &refusal) {
		return false, nil
	}
	return false, failed(err, ErrReportNotFound)
}

// The statements that join a report to its status (vtnstore.ReportJoinSQL), made once: a
// VEN client's checks that it holds the dispatch's asset.
var (
	reportJoined     = dispatchstore.NewJoinedStatement(vtnstore.ReportJoinSQL(false))
	reportJoinedHeld = dispatchstore.NewJoinedStatement(vtnstore.ReportJoinSQL(true))
)

func reportsFull() error {
	return app.Fail(app.Conflict, "The client keeps %d reports of the event, the most it may; delete one first", MaxReportsPerEvent)
}

// Report is the report id as p may see it: a VEN client its client's, the business logic
// the organisation's.
func (s *Service) Report(ctx context.Context, p *auth.Principal, id string) (Report, error) {
	if err := organisationOnly(p); err != nil {
		return Report{}, err
	}
	uid, err := uuid.Parse(id)
	if err != nil {
		return Report{}, ErrReportNotFound
	}
	r, err := s.Store.Report(ctx, p.Namespace, uid)
	if err != nil {
		return Report{}, failed(err, ErrReportNotFound)
	}
	if !BusinessLogic(p) && r.ClientName != p.ClientName {
		return Report{}, ErrReportNotFound
	}
	return r, nil
}

// ReportSearch is a report search: the report's program, event and clientName (empty: any)
// and the page.
type ReportSearch struct {
	ProgramID, EventID, ClientName string
	Skip, Limit                    int
}

// Reports answers a page of the reports p sees that q names.
func (s *Service) Reports(ctx context.Context, p *auth.Principal, q ReportSearch) ([]Report, error) {
	if err := organisationOnly(p); err != nil {
		return nil, err
	}
	sq := vtnstore.ReportQuery{Organisation: p.Namespace, ProgramID: q.ProgramID, EventID: q.EventID,
		ReportsClient: q.ClientName, Skip: q.Skip, Limit: q.Limit}
	if !BusinessLogic(p) {
		sq.Sender = p.ClientName
	}
	out, err := s.Store.Reports(ctx, sq)
	return out, failed(err, ErrReportNotFound)
}

// UpdateReport replaces the report id with in, judged and taking effect as a new report does;
// moved to another event, it is refused as a new one there would be when its client keeps the
// most reports it may of that event (409), before it takes effect.
func (s *Service) UpdateReport(ctx context.Context, p *auth.Principal, id string, in ReportInput) (Report, error) {
	cur, err := s.Report(ctx, p, id)
	if err != nil {
		return Report{}, err
	}
	j, err := s.judge(ctx, p, in)
	if err != nil {
		return Report{}, err
	}
	// Moved to another event, it takes a place of its client's there: checked before it takes
	// effect, and again under the lock of that event's dispatch as it is stored.
	if was, err := uuid.Parse(cur.EventID); err != nil || was != j.dispatch.EventID {
		n, err := s.Store.CountReports(ctx, p.Namespace, cur.ClientName, in.EventID, MaxReportsPerEvent)
		if err != nil {
			return Report{}, failed(err, ErrReportNotFound)
		}
		if n >= MaxReportsPerEvent {
			return Report{}, reportsFull()
		}
	}
	if err := s.apply(ctx, p, j); err != nil {
		return Report{}, err
	}
	cur.ProgramID, cur.EventID, cur.ReportClientName, cur.Name, cur.Body = in.ProgramID, in.EventID, in.ClientName, in.Name, in.Body
	cur.Modified = s.stamp()
	out, err := s.Store.UpdateReport(ctx, p.Namespace, cur, MaxReportsPerEvent)
	if errors.Is(err, vtnstore.ErrFull) {
		return Report{}, reportsFull()
	}
	return out, failed(err, ErrReportNotFound)
}

// DeleteReport deletes the stored report only: the dispatch's status and the readings it gave
// stay.
func (s *Service) DeleteReport(ctx context.Context, p *auth.Principal, id string) (Report, error) {
	cur, err := s.Report(ctx, p, id)
	if err != nil {
		return Report{}, err
	}
	out, err := s.Store.DeleteReport(ctx, p.Namespace, cur.ID)
	return out, failed(err, ErrReportNotFound)
}

// Package dispatches holds the use cases of a dispatch's status callback (docs/api.md,
// "Dispatch status callbacks"): an asset controller reports what became of a
// dispatch of one of the organisation's assets, judged by internal/dispatch's state machine
// under the dispatch's row lock (internal/dispatchstore), and the example DispatchEvent that
// GET /examples/dispatch-event answers. It speaks no HTTP.
package dispatches

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

// Service runs the dispatch callback use cases.
type Service struct {
	// Households finds the caller's assets (the cache first, past it on a miss).
	Households *app.Service
	Store      *dispatchstore.Store
}

// New builds the use cases on the household ones and the dispatches' database.
func New(households *app.Service, store *dispatchstore.Store) *Service {
	if store == nil {
		panic("dispatches.New: the dispatches' store is required")
	}
	return &Service{Households: households, Store: store}
}

// The refusals of a callback.
var (
	// ErrDispatchNotFound answers an event id that is no dispatch of the asset in the caller's
	// organisation (another organisation's included: told alike, so its ids reveal nothing).
	ErrDispatchNotFound = app.Fail(app.NotFound, "Dispatch event not found or not authorized")
	// ErrUnavailable answers a report the database could not take now: nothing was recorded.
	ErrUnavailable = &app.Error{Kind: app.Unavailable,
		Detail: "The dispatch store is unavailable; nothing was recorded, retry", RetryAfter: db.RetryAfterSeconds}
)

// CallbackInput is a status report of an asset controller, read by the door.
type CallbackInput struct {
	// Asset is the asset's API id, or its external id when External.
	Asset    string
	External bool
	// EventID is the dispatch's event id as the path spells it (not necessarily a UUID).
	EventID string
	// Status is the reported status (a dispatch.Reported one) and At the report's timestamp.
	Status dispatch.Status
	At     time.Time
	// Windowed (CallbackJoined only): Status is what the report says of a dispatch whose
	// window starts after now, Started (a dispatch.Reported one, or empty: nothing) of one
	// whose window has started (dispatchstore.Report's Windowed).
	Windowed bool
	Started  dispatch.Status
}

// CallbackResult answers a recorded report: the dispatch's status now (prod's EventStatus
// spelling) and whether this report changed it (false: the same status again).
type CallbackResult struct {
	EventID string `json:"event_id"`
	AssetID string `json:"asset_id"`
	Status  string `json:"status"`
	Changed bool   `json:"changed"`
}

// Callback records a reported status of a dispatch of the caller's asset (its timestamp
// already judged by the door: dispatch.CheckReportTime): the asset must be the organisation's
// (404 otherwise), the event one of its dispatches (404); the same status again changes
// nothing; a step back, anything after a final status (a cancellation that came first
// included), or EXECUTED of a window not started (dispatch.Judge), is a conflict (409); the
// database away is Unavailable (503).
func (s *Service) Callback(ctx context.Context, p *auth.Principal, in CallbackInput) (CallbackResult, error) {
	res, committed, err := s.CallbackOn(ctx, s.Store.Pool, p, in)
	if err == nil {
		committed()
	}
	return res, err
}

// CallbackOn is Callback with the change written on q, a transaction another use case began,
// so that it commits with what that one writes (an OpenADR report stored with the change it
// says), or not at all. Once q has committed, the caller calls committed, which tells the
// flex event's controllers of a change.
func (s *Service) CallbackOn(ctx context.Context, q dispatchstore.Querier, p *auth.Principal, in CallbackInput) (
	res CallbackResult, committed func(), err error) {
	return s.callbackOn(ctx, q, p, in, nil)
}

// CallbackJoined is CallbackOn with another store's write joined to the status's statement
// (dispatchstore.RecordJoined): written with the change, or with the same status again (or
// with a Windowed report that says nothing of a started window), and never when the callback
// is refused. Its gate closed is dispatchstore.ErrClosed, nothing written. q commits the
// statement itself (an implicit transaction), then the caller calls committed. The result's
// status is the dispatch's as the report left it.
func (s *Service) CallbackJoined(ctx context.Context, q dispatchstore.Querier, p *auth.Principal, in CallbackInput,
	j dispatchstore.Joined) (res CallbackResult, committed func(), err error) {
	return s.callbackOn(ctx, q, p, in, &j)
}

func (s *Service) callbackOn(ctx context.Context, q dispatchstore.Querier, p *auth.Principal, in CallbackInput,
	j *dispatchstore.Joined) (res CallbackResult, committed func(), err error) {
	if p.Kind == auth.KindEndUser {
		return CallbackResult{}, nil, app.Fail(app.Forbidden, "An end-user token cannot report a dispatch's status")
	}
	if !dispatch.Reported(in.Status) || (in.Windowed && in.Started != "" && !dispatch.Reported(in.Started)) {
		return CallbackResult{}, nil, app.InvalidFields(app.Field("Input should be 'RECEIVED', 'ACCEPTED', 'REJECTED', 'FAILED' or 'EXECUTED'",
			"enum", "body", "status"))
	}
	assetID, err := s.assetID(ctx, p, in)
	if err != nil {
		return CallbackResult{}, nil, err
	}
	eventID, err := uuid.Parse(in.EventID)
	if err != nil {
		return CallbackResult{}, nil, ErrDispatchNotFound
	}
	r := dispatchstore.Report{AssetID: assetID, EventID: eventID, Status: in.Status, Windowed: in.Windowed,
		Started: in.Started, At: in.At, By: p.Username}
	var changed bool
	var flexEvent string
	status := in.Status
	if j == nil {
		changed, flexEvent, err = s.Store.RecordOn(ctx, q, p.Namespace, r, s.now())
	} else {
		changed, flexEvent, status, err = s.Store.RecordJoined(ctx, q, p.Namespace, r, s.now(), *j)
	}
	switch {
	case errors.Is(err, dispatchstore.ErrNotFound):
		return CallbackResult{}, nil, ErrDispatchNotFound
	case errors.Is(err, dispatch.ErrStepBack), errors.Is(err, dispatch.ErrFinal), errors.Is(err, dispatch.ErrNotStarted):
		msg := err.Error()
		return CallbackResult{}, nil, app.Fail(app.Conflict, "Refused: %s%s", strings.ToUpper(msg[:1]), msg[1:])
	case db.Unavailable(err):
		return CallbackResult{}, nil, ErrUnavailable
	case err != nil:
		return CallbackResult{}, nil, err
	}
	committed = func() {
		if changed {
			s.Store.Changed(p.Namespace, flexEvent)
		}
	}
	return CallbackResult{EventID: eventID.String(), AssetID: assetID, Status: EventStatus(status), Changed: changed},
		committed, nil
}

// assetID is the API id of the caller organisation's asset the callback names, by API or
// external id (app.Service.FindAsset).
func (s *Service) assetID(ctx context.Context, p *auth.Principal, in CallbackInput) (string, error) {
	asset, err := s.Households.FindAsset(ctx, p, in.Asset, in.External)
	if err != nil {
		return "", err
	}
	return asset.Labels[flexv1.IDLabel], nil
}

// EventStatus is a reported status as prod's EventStatus spells it (RECEIVED, ...).
func EventStatus(s dispatch.Status) string { return strings.ToUpper(string(s)) }

// ReportedStatus reads prod's EventStatus spelling; ok is false for anything else.
func ReportedStatus(s string) (dispatch.Status, bool) {
	st := dispatch.Status(strings.ToLower(s))
	return st, s == strings.ToUpper(s) && dispatch.Reported(st)
}

// EventStatuses are the statuses an asset controller reports, as prod's EventStatus enum
// lists them.
var EventStatuses = []string{"RECEIVED", "ACCEPTED", "REJECTED", "FAILED", "EXECUTED"}

func (s *Service) now() time.Time {
	if s.Households != nil && s.Households.Now != nil {
		return s.Households.Now()
	}
	return time.Now()
}

// The example's ids: fixed, so the example reads the same on every call.
const (
	exampleOrganisation = "example-organisation"
	exampleFlexEvent    = "4f0c2f8e-7d0b-4c5e-9a51-3b8d6e2a1c07"
	exampleAssetID      = "9b2e6c1d-3f4a-4e8b-a7c5-0d1f2e3a4b5c"
)

// Example is a filled-in DispatchEvent, as one is delivered: a 5 kW battery asked to turn
// down (discharge) over the hour starting at the next whole hour after now plus Lead, issued
// now. base is Flexsite's public address (scheme and host).
func Example(now time.Time, base string) dispatch.Event {
	now = now.UTC().Truncate(time.Second)
	from := now.Add(dispatch.Lead).Truncate(time.Hour).Add(time.Hour)
	id := dispatch.EventID(exampleOrganisation, exampleFlexEvent, exampleAssetID)
	return dispatch.Event{EventID: id.String(), AssetID: exampleAssetID, IssuedTimestamp: dispatch.Stamp(now),
		EventTimestamp: dispatch.Stamp(now), MarketID: string(flexv1.PropositionName("limited_pause")),
		LevelKW:  dispatch.LevelKW(flexv1.AssetTypeBattery, flexv1.FlexTurnDown, 5000),
		FromTime: dispatch.Stamp(from), ToTime: dispatch.Stamp(from.Add(time.Hour)),
		UpdateStatusCallback: base + dispatch.CallbackPath(exampleAssetID, id)}
}

package restapi

import (
	"net/http"
	"time"

	"github.com/flexsite/flexsite/internal/app/dispatches"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/web"
)

// The dispatch endpoints (docs/api.md, "Dispatch status callbacks"): an asset controller's status
// callback, and the example DispatchEvent. The door reads prod's EventResponse; the use case judges
// the report (internal/dispatch's state machine).

// dispatchCallback is POST /entities/asset/{asset_id}/callback/{event_id}: the path's, the
// query's and the body's problems are answered together (422).
func (a *API) dispatchCallback(r *http.Request, p *auth.Principal) (any, error) {
	f := &fields{}
	in := dispatches.CallbackInput{EventID: r.PathValue("event_id")}
	if external := queryBool(f, r.URL.Query(), "asset_id_is_external"); external != nil {
		in.External = *external
	}
	if in.External {
		in.Asset = r.PathValue("asset_id")
	} else {
		in.Asset = f.UUIDParam(r, "asset_id")
	}
	body, err := web.DecodeJSON(r)
	if err != nil {
		return nil, f.Join(err)
	}
	in.Status, in.At = parseEventResponse(f, body, a.Now())
	if err := f.Err(); err != nil {
		return nil, err
	}
	return a.Dispatches.Callback(r.Context(), p, in)
}

// parseEventResponse reads prod's EventResponse {timestamp*: date-time with a zone, status*:
// EventStatus}: the timestamp a time within the supported range, not later than now beyond
// the clocks' skew (dispatch.CheckReportTime).
func parseEventResponse(f *fields, body map[string]any, now time.Time) (st dispatch.Status, at time.Time) {
	loc := []any{"body"}
	if t, ok := f.Timestamp(body, loc, "timestamp", true); ok {
		if err := dispatch.CheckReportTime(t, now); err != nil {
			f.AddValidation(err, []any{"body", "timestamp"})
		}
		at = t
	}
	if s, ok := web.Enum(f, body, loc, "status", true, dispatches.EventStatuses); ok {
		st, _ = dispatches.ReportedStatus(s)
	}
	return st, at
}

// exampleDispatchEvent is GET /examples/dispatch-event: a filled-in DispatchEvent whose
// callback URL is on Flexsite's public address. It needs an organisation's token of any role,
// as prod's (OAuth2PasswordBearer) and as every route but the log-in.
func (a *API) exampleDispatchEvent(r *http.Request, _ *auth.Principal) (any, error) {
	return dispatches.Example(a.Now(), web.PublicBase(a.PublicURL, r)), nil
}

package openadr

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/flexevents"
	"github.com/flexsite/flexsite/internal/app/vtn"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
)

// The payload and target types of the organisation's own event (a flex event, as POST /events
// declares it): private strings, as the Definition allows (docs/openadr.md, "Events").
const (
	// PayloadFlexDirection carries the flex event's direction: turn_down or turn_up.
	PayloadFlexDirection = "FLEX_DIRECTION"
	// PayloadFlexRate carries the flex event's rate, in pence per kWh.
	PayloadFlexRate = "FLEX_RATE"
	// TargetSiteID names the flex event's sites by their API ids.
	TargetSiteID = "SITE_ID"
)

// maxEventBody bounds an event's body: a flex event's fields and up to a thousand site ids.
const maxEventBody = 256 << 10

// searchEvents answers the events the caller sees (one per dispatch), latest window end first:
// the business logic sees the organisation's, a VEN client those of the assets its VENs hold.
// programID names a proposition; targetType RESOURCE_NAME with targetValues names assets (any
// other target type targets no event).
func (d *Door) searchEvents(r *http.Request, p *auth.Principal) (any, error) {
	s, err := parseSearch(r)
	if err != nil {
		return nil, err
	}
	q := vtn.EventQuery{Program: r.URL.Query().Get(fieldProgramID), Skip: s.Skip, Limit: s.Limit}
	switch {
	case s.TargetType == "":
	case s.TargetType == TargetResourceName && len(s.TargetValues) > 0:
		q.Assets = s.TargetValues
	case s.TargetType == TargetResourceName:
	default:
		return []oadr.Event{}, nil
	}
	v, err := d.VTN.Sees(r.Context(), p)
	if err != nil {
		return nil, err
	}
	found, err := d.VTN.SearchEvents(r.Context(), p.Namespace, v, q)
	if err != nil {
		return nil, err
	}
	out := make(eventsAnswer, 0, len(found))
	for _, e := range found {
		out = append(out, EventShape(e))
	}
	return out, nil
}

// getEvent answers one event the caller sees: a dispatch's, or (for the business logic) the
// flex event POST /events declared, by its id.
func (d *Door) getEvent(r *http.Request, p *auth.Principal) (any, error) {
	return d.eventByID(r, p)
}

func (d *Door) eventByID(r *http.Request, p *auth.Principal) (oadr.Event, error) {
	id := r.PathValue("eventID")
	e, err := d.VTN.EventOf(r.Context(), p, id)
	if err == nil {
		return EventShape(e), nil
	}
	if !errors.Is(err, vtn.ErrEventNotFound) {
		return oadr.Event{}, err
	}
	if vtn.BusinessLogic(p) {
		rec, err := d.FlexEvents.Get(r.Context(), p, id)
		if err == nil {
			return flexEventShape(rec), nil
		}
		if e := app.As(err); e == nil || e.Kind != app.NotFound {
			return oadr.Event{}, err
		}
	}
	return oadr.Event{}, notFound("Event", id)
}

// createEvent declares a flex event from the document's event, through the same use case and
// rules as REST POST /flex-events (docs/openadr.md, "Declaring a flex event"): programID is the
// proposition; intervalPeriod (start, duration) the window; a FLEX_DIRECTION and a FLEX_RATE
// payload its direction and rate; targets of type SITE_ID its sites (none: every site enrolled).
// It answers 201 with the flex event as an event whose id is the flex event's, which the
// business logic reads, and cancels, at /events/{id}; the dispatches' events follow.
func (d *Door) createEvent(r *http.Request, p *auth.Principal) (any, error) {
	in, err := readEventInput(r)
	if err != nil {
		return nil, err
	}
	rec, err := d.FlexEvents.Create(r.Context(), p, in)
	if err != nil {
		return nil, eventFieldsNamed(err)
	}
	return web.WithStatus{Status: http.StatusCreated, Body: flexEventShape(rec)}, nil
}

// updateEvent: a flex event is not changed once declared (it is a cause of credits); it is
// cancelled (DELETE) and declared again. An event the caller does not see is 404.
func (d *Door) updateEvent(r *http.Request, p *auth.Principal) (any, error) {
	if _, err := d.eventByID(r, p); err != nil {
		return nil, err
	}
	return nil, forbidden("An event is not changed once declared: DELETE /events/{id} of its flex event cancels it, " +
		"and POST /events declares another")
}

// deleteEvent cancels the flex event named (through the flex events' use case: its open
// dispatches are cancelled, and their events deleted with a DELETE notification) and answers
// it as it was. A dispatch's own event is not cancelled alone: the refusal names its flex event.
func (d *Door) deleteEvent(r *http.Request, p *auth.Principal) (any, error) {
	id := r.PathValue("eventID")
	if e, err := d.VTN.EventOf(r.Context(), p, id); err == nil {
		return nil, forbidden("Event %s is the dispatch of flex event %s to one asset: DELETE /events/%s cancels the flex event "+
			"and every dispatch of it", id, e.FlexEvent, e.FlexEvent)
	} else if !errors.Is(err, vtn.ErrEventNotFound) {
		return nil, err
	}
	rec, err := d.FlexEvents.Cancel(r.Context(), p, id)
	if errors.Is(err, flexevents.ErrEventEnded) {
		return nil, forbidden("%s", "The event has ended: it is settled from the readings and kept")
	}
	if e := app.As(err); e != nil && e.Kind == app.NotFound {
		return nil, notFound("Event", id)
	}
	if err != nil {
		return nil, err
	}
	return flexEventShape(rec), nil
}

// EventShape is a dispatch as the document's event (docs/openadr.md, "Events"): the one shape
// the searches, GET /events/{id} and the notifications answer. One interval per half-hour of the
// window, each with the dispatch's level as DISPATCH_SETPOINT (kW), and for price_curve the
// declared price of that half-hour as PRICE (£/MWh, GBP).
func EventShape(e vtn.Event) oadr.Event {
	id := e.EventID.String()
	name := e.FlexEvent
	created, modified := e.IssuedAt.UTC(), e.UpdatedAt.UTC()
	objectType := oadr.EventObjectTypeEVENT
	priceCurve := e.Proposition == string(flexv1.PropositionPriceCurve)
	descriptors := []oadr.EventPayloadDescriptor{payloadDescriptor(PayloadDispatchSetpoint, UnitsKW, "")}
	if priceCurve {
		descriptors = append(descriptors, payloadDescriptor(PayloadPrice, UnitsMWH, CurrencyGBP))
	}
	byStart := map[int64]float64{}
	for _, p := range e.Prices {
		byStart[p.Start.Unix()] = p.Centi.Float()
	}
	halfHour := isoDuration(vtn.HalfHour)
	// The level is the same in every interval: one value, shared by them (read only).
	setpoint := valuesMap(PayloadDispatchSetpoint, e.LevelKW)
	var intervals []oadr.Interval
	for i, t := 0, e.From.UTC(); t.Before(e.To); i, t = i+1, t.Add(vtn.HalfHour) {
		payloads := []oadr.ValuesMap{setpoint}
		if price, ok := byStart[t.Unix()]; ok && priceCurve {
			payloads = append(payloads, valuesMap(PayloadPrice, price))
		}
		intervals = append(intervals, oadr.Interval{Id: int32(i), //nolint:gosec // a window's half-hours
			IntervalPeriod: &oadr.IntervalPeriod{Start: t, Duration: &halfHour}, Payloads: payloads})
	}
	if intervals == nil {
		intervals = []oadr.Interval{}
	}
	duration := isoDuration(e.To.Sub(e.From))
	usage, kwh := ReportUsage, UnitsKWH
	reports := []oadr.ReportDescriptor{{PayloadType: ReportOperatingState}, {PayloadType: usage, Units: &kwh}}
	targets := []oadr.ValuesMap{valuesMap(TargetResourceName, e.AssetID)}
	return oadr.Event{Id: &id, CreatedDateTime: &created, ModificationDateTime: &modified, ObjectType: &objectType,
		ProgramID: e.Proposition, EventName: &name, Targets: &targets, ReportDescriptors: &reports,
		PayloadDescriptors: &descriptors, IntervalPeriod: &oadr.IntervalPeriod{Start: e.From.UTC(), Duration: &duration},
		Intervals: intervals}
}

// flexEventShape is the organisation's flex event as an event: its id, proposition and window,
// one interval with its FLEX_DIRECTION and FLEX_RATE, its sites as SITE_ID targets.
func flexEventShape(rec flexevents.EventRecord) oadr.Event {
	id, name := rec.ID, rec.ID
	objectType := oadr.EventObjectTypeEVENT
	start, _ := time.Parse(time.RFC3339, rec.StartAt)
	end, _ := time.Parse(time.RFC3339, rec.EndAt)
	duration := isoDuration(end.Sub(start))
	descriptors := []oadr.EventPayloadDescriptor{payloadDescriptor(PayloadFlexDirection, "", ""),
		payloadDescriptor(PayloadFlexRate, UnitsKWH, "")}
	out := oadr.Event{Id: &id, ObjectType: &objectType, ProgramID: string(rec.Proposition), EventName: &name,
		PayloadDescriptors: &descriptors, IntervalPeriod: &oadr.IntervalPeriod{Start: start.UTC(), Duration: &duration},
		Intervals: []oadr.Interval{{Id: 0, Payloads: []oadr.ValuesMap{valuesMap(PayloadFlexDirection, string(rec.Direction)),
			valuesMap(PayloadFlexRate, rec.RatePencePerKWh)}}}}
	if len(rec.SiteIDs) > 0 {
		sites := make([]any, len(rec.SiteIDs))
		for i, s := range rec.SiteIDs {
			sites[i] = s
		}
		targets := []oadr.ValuesMap{valuesMap(TargetSiteID, sites...)}
		out.Targets = &targets
	}
	return out
}

// valuesMap is a valuesMap of values (numbers, strings, booleans).
func valuesMap(typ string, values ...any) oadr.ValuesMap {
	out := oadr.ValuesMap{Type: typ, Values: make([]oadr.ValuesMap_Values_Item, 0, len(values))}
	for _, v := range values {
		raw, err := json.Marshal(v)
		var item oadr.ValuesMap_Values_Item
		if err == nil && item.UnmarshalJSON(raw) == nil {
			out.Values = append(out.Values, item)
		}
	}
	return out
}

// isoDuration is d in ISO 8601 (PT1H30M); d is whole seconds.
func isoDuration(d time.Duration) string {
	if d <= 0 {
		return "PT0S"
	}
	var b strings.Builder
	b.WriteString("PT")
	h, m, s := int64(d/time.Hour), int64(d%time.Hour/time.Minute), int64(d%time.Minute/time.Second)
	if h > 0 {
		fmt.Fprintf(&b, "%dH", h)
	}
	if m > 0 {
		fmt.Fprintf(&b, "%dM", m)
	}
	if s > 0 {
		fmt.Fprintf(&b, "%dS", s)
	}
	return b.String()
}

// isoDurationRE reads the durations a window may have: days, hours, minutes, whole seconds
// (years and months have no fixed length, and are refused).
var isoDurationRE = regexp.MustCompile(`^P(?:(\d{1,4})W)?(?:(\d{1,4})D)?(?:T(?:(\d{1,6})H)?(?:(\d{1,6})M)?(?:(\d{1,8})S)?)?$`)

func parseISODuration(s string) (time.Duration, bool) {
	m := isoDurationRE.FindStringSubmatch(s)
	if m == nil || s == "P" || s == "PT" || strings.HasSuffix(s, "T") {
		return 0, false
	}
	var d time.Duration
	for i, unit := range []time.Duration{7 * 24 * time.Hour, 24 * time.Hour, time.Hour, time.Minute, time.Second} {
		if m[i+1] == "" {
			continue
		}
		n, err := strconv.ParseInt(m[i+1], 10, 64)
		if err != nil {
			return 0, false
		}
		d += time.Duration(n) * unit
	}
	return d, true
}

// eventInput is the part of the document's event that POST /events reads.
type eventInput struct {
	ProgramID      *string `json:"programID"`
	IntervalPeriod *struct {
		Start    *string `json:"start"`
		Duration *string `json:"duration"`
	} `json:"intervalPeriod"`
	Intervals []struct {
		Payloads []valuesInput `json:"payloads"`
	} `json:"intervals"`
	Targets []valuesInput `json:"targets"`
}

type valuesInput struct {
	Type   string            `json:"type"`
	Values []json.RawMessage `json:"values"`
}

// readEventInput reads POST /events's body into a flex event to declare; what it cannot read
// is a 400 problem naming where.
func readEventInput(r *http.Request) (flexevents.CreateInput, error) {
	var in flexevents.CreateInput
	data, err := web.ReadBodyUpTo(r, maxEventBody)
	if err != nil {
		return in, err
	}
	if _, err := web.DecodeObject(data); err != nil {
		return in, err
	}
	var body eventInput
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&body); err != nil {
		return in, badRequest("The body is not an event: %s", jsonProblem(err))
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if body.ProgramID == nil || *body.ProgramID == "" {
		bad("programID: required (a proposition: %s)", propositionsText())
	} else {
		in.Proposition = flexv1.PropositionName(*body.ProgramID)
	}
	switch ip := body.IntervalPeriod; {
	case ip == nil || ip.Start == nil:
		bad("intervalPeriod.start: required (the window's start, RFC 3339)")
	default:
		start, err := time.Parse(time.RFC3339, *ip.Start)
		if err != nil {
			bad("intervalPeriod.start: not an RFC 3339 date-time")
			break
		}
		in.Start = start
		if ip.Duration == nil {
			bad("intervalPeriod.duration: required (the window's length, ISO 8601, e.g. PT1H)")
			break
		}
		d, ok := parseISODuration(*ip.Duration)
		if !ok {
			bad("intervalPeriod.duration: not an ISO 8601 duration of weeks, days, hours, minutes or seconds")
			break
		}
		in.End = start.Add(d)
	}
	var direction, rate []json.RawMessage
	for i, iv := range body.Intervals {
		for j, pl := range iv.Payloads {
			switch pl.Type {
			case PayloadFlexDirection:
				direction = append(direction, pl.Values...)
			case PayloadFlexRate:
				rate = append(rate, pl.Values...)
			default:
				bad("intervals[%d].payloads[%d].type: %q is not declared here (a flex event is declared by %s and %s; "+
					"each asset's level follows from its rating)", i, j, pl.Type, PayloadFlexDirection, PayloadFlexRate)
			}
		}
	}
	if s, ok := oneValue[string](direction); ok {
		in.Direction = flexv1.FlexDirection(s)
	} else {
		bad("%s: one value required, turn_down or turn_up", PayloadFlexDirection)
	}
	if x, ok := oneValue[float64](rate); ok {
		c, err := validation.FlexRateNumber(x)
		if err != nil {
			bad("%s: %s", PayloadFlexRate, validationMsg(err))
		}
		in.RateCentipence = c
	} else {
		bad("%s: one number required (pence per kWh)", PayloadFlexRate)
	}
	for i, t := range body.Targets {
		if t.Type != TargetSiteID {
			bad("targets[%d].type: %q does not target a flex event (its sites are targets of type %s)", i, t.Type, TargetSiteID)
			continue
		}
		for j, raw := range t.Values {
			var site string
			if json.Unmarshal(raw, &site) != nil || site == "" {
				bad("targets[%d].values[%d]: a site id (a string)", i, j)
				continue
			}
			in.SiteIDs = append(in.SiteIDs, site)
		}
	}
	if len(problems) > 0 {
		return in, badRequest("%s", strings.Join(problems, "; "))
	}
	return in, nil
}

// oneValue is the single value of vs, of type T.
func oneValue[T any](vs []json.RawMessage) (T, bool) {
	var v T
	if len(vs) != 1 {
		return v, false
	}
	return v, json.Unmarshal(vs[0], &v) == nil
}

func propositionsText() string {
	names := make([]string, len(flexv1.AllPropositions))
	for i, p := range flexv1.AllPropositions {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

func validationMsg(err error) string {
	var ve *validation.Error
	if errors.As(err, &ve) {
		return ve.Msg
	}
	return err.Error()
}

// jsonProblem words a JSON decoding error without echoing the body.
func jsonProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return fmt.Sprintf("%s should be %s", typeErr.Field, typeErr.Type)
	}
	return "malformed JSON"
}

// eventFields are the document's names of the flex event's parts the use case refuses.
var eventFields = map[string]string{
	"proposition": fieldProgramID, "start_at": "intervalPeriod.start", "end_at": "intervalPeriod.duration",
	"direction": PayloadFlexDirection, "rate_pence_per_kwh": PayloadFlexRate, "site_ids": "targets(" + TargetSiteID + ")",
	"deadline": "intervalPeriod",
}

// eventFieldsNamed renames the fields of the use case's refusal as the document's event names
// them; any other error is left as it is.
func eventFieldsNamed(err error) error {
	e := app.As(err)
	if e == nil || e.Kind != app.Invalid {
		return err
	}
	fields, ok := e.Detail.([]app.FieldError)
	if !ok {
		return err
	}
	out := make([]app.FieldError, len(fields))
	for i, f := range fields {
		loc := make([]any, 0, len(f.Loc))
		for _, l := range f.Loc {
			if l == "body" {
				continue
			}
			if s, ok := l.(string); ok && eventFields[s] != "" {
				l = eventFields[s]
			}
			loc = append(loc, l)
		}
		out[i] = app.FieldError{Loc: loc, Msg: f.Msg, Type: f.Type}
	}
	return app.InvalidFields(out...)
}

package openadr

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/flexsite/flexsite/internal/app/vtn"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/web"
)

// The bounds on a report (docs/openadr.md, "Limits").
const (
	maxReportResources = 50
	maxReportIntervals = 500
	maxReportPayloads  = 10
)

// reportBody is what a report keeps beside its ids: its payloadDescriptors and resources,
// answered back as they were read (as the document's types write them).
type reportBody struct {
	PayloadDescriptors *[]oadr.ReportPayloadDescriptor `json:"payloadDescriptors,omitempty"`
	Resources          reportResources                 `json:"resources"`
}

// reportResources is the type of a report's resources (oadr.Report's Resources).
type reportResources = []struct {
	IntervalPeriod *oadr.IntervalPeriod `json:"intervalPeriod,omitempty"`
	Intervals      []oadr.Interval      `json:"intervals"`
	ResourceName   string               `json:"resourceName"`
}

// reportIn reads a report: its shape and the document's bounds here, what it says into the
// use case's input (each resource's OPERATING_STATE values and USAGE intervals, timed), and
// its payloadDescriptors and resources as read (the body the use case stores, which the
// answer gives back).
func reportIn(r *http.Request) (vtn.ReportInput, reportBody, error) {
	var body oadr.Report
	if err := decodeBody(r, maxReportBody, &body); err != nil {
		return vtn.ReportInput{}, reportBody{}, err
	}
	if err := checkReportFields(&body); err != nil {
		return vtn.ReportInput{}, reportBody{}, err
	}
	kwh, err := usageUnit(body.PayloadDescriptors)
	if err != nil {
		return vtn.ReportInput{}, reportBody{}, err
	}
	in := vtn.ReportInput{ProgramID: body.ProgramID, EventID: body.EventID, ClientName: body.ClientName}
	if body.ReportName != nil {
		in.Name = *body.ReportName
	}
	intervals := 0
	for i, res := range body.Resources {
		if intervals += len(res.Intervals); intervals > maxReportIntervals {
			return vtn.ReportInput{}, reportBody{}, badRequest("a report holds at most %d intervals", maxReportIntervals)
		}
		rr, err := reportedResource(i, res.ResourceName, res.IntervalPeriod, res.Intervals, kwh)
		if err != nil {
			return vtn.ReportInput{}, reportBody{}, err
		}
		in.Resources = append(in.Resources, rr)
	}
	kept := reportBody{PayloadDescriptors: body.PayloadDescriptors, Resources: body.Resources}
	if in.Body, err = json.Marshal(kept); err != nil {
		return vtn.ReportInput{}, reportBody{}, err
	}
	return in, kept, nil
}

// checkReportFields refuses a report's own fields outside the document's bounds.
func checkReportFields(body *oadr.Report) error {
	if err := checkObjectType("objectType", body.ObjectType, oadr.ReportObjectTypeREPORT); err != nil {
		return err
	}
	if err := checkObjectID(fieldProgramID, body.ProgramID); err != nil {
		return err
	}
	if err := checkObjectID("eventID", body.EventID); err != nil {
		return err
	}
	if err := checkText("clientName", body.ClientName); err != nil {
		return err
	}
	if body.ReportName != nil {
		if err := checkText("reportName", *body.ReportName); err != nil {
			return err
		}
	}
	if body.Resources == nil {
		return badRequest("resources is required")
	}
	if len(body.Resources) > maxReportResources {
		return badRequest("resources holds at most %d resources", maxReportResources)
	}
	return nil
}

// usageUnit reads the payloadDescriptors: what one USAGE value is in kWh (1 unless a
// descriptor says WH); any payload type but OPERATING_STATE and USAGE is refused.
func usageUnit(descriptors *[]oadr.ReportPayloadDescriptor) (float64, error) {
	kwh := 1.0
	if descriptors == nil {
		return kwh, nil
	}
	if len(*descriptors) > maxReportPayloads {
		return 0, badRequest("payloadDescriptors holds at most %d descriptors", maxReportPayloads)
	}
	for i, pd := range *descriptors {
		at := fmt.Sprintf("payloadDescriptors[%d]", i)
		if err := checkObjectType(at+".objectType", pd.ObjectType, oadr.REPORTPAYLOADDESCRIPTOR); err != nil {
			return 0, err
		}
		if pd.PayloadType != ReportOperatingState && pd.PayloadType != ReportUsage {
			return 0, badRequest("%s.payloadType must be %s or %s", at, ReportOperatingState, ReportUsage)
		}
		if pd.Confidence != nil && (*pd.Confidence < 0 || *pd.Confidence > 100) {
			return 0, badRequest("%s.confidence must be from 0 to 100", at)
		}
		if pd.PayloadType == ReportUsage && pd.Units != nil {
			switch *pd.Units {
			case UnitsKWH:
			case UnitsWH:
				kwh = 0.001
			default:
				return 0, badRequest("%s.units: USAGE is reported in %s (or %s)", at, UnitsKWH, UnitsWH)
			}
		}
	}
	return kwh, nil
}

// reportedResource reads the i-th resource of a report: its OPERATING_STATE values and its
// USAGE intervals (values times kwh, in kWh).
func reportedResource(i int, name string, period *oadr.IntervalPeriod, intervals []oadr.Interval,
	kwh float64) (vtn.ReportedResource, error) {
	// Where a refusal points, spelt only when one is made.
	at := func() string { return fmt.Sprintf("resources[%d]", i) }
	ivAt := func(j int) string { return fmt.Sprintf("%s.intervals[%d]", at(), j) }
	plAt := func(j, k int) string { return fmt.Sprintf("%s.payloads[%d]", ivAt(j), k) }
	if err := checkText(at()+".resourceName", name); err != nil {
		return vtn.ReportedResource{}, err
	}
	if intervals == nil {
		return vtn.ReportedResource{}, badRequest("%s.intervals is required", at())
	}
	if period != nil {
		if err := checkPeriod(at()+".intervalPeriod", period); err != nil {
			return vtn.ReportedResource{}, err
		}
	}
	rr := vtn.ReportedResource{Name: name, Index: i}
	for j, iv := range intervals {
		if iv.IntervalPeriod != nil {
			if err := checkPeriod(ivAt(j)+".intervalPeriod", iv.IntervalPeriod); err != nil {
				return vtn.ReportedResource{}, err
			}
		}
		if iv.Payloads == nil {
			return vtn.ReportedResource{}, badRequest("%s.payloads is required", ivAt(j))
		}
		if len(iv.Payloads) > maxReportPayloads {
			return vtn.ReportedResource{}, badRequest("%s.payloads holds at most %d payloads", ivAt(j), maxReportPayloads)
		}
		for k, pl := range iv.Payloads {
			if len(pl.Values) != 1 {
				return vtn.ReportedResource{}, badRequest("%s.values must hold one value", plAt(j, k))
			}
			v, err := valueOf(pl.Values[0])
			if err != nil {
				return vtn.ReportedResource{}, badRequest("%s.values[0] must be a number, a string, a boolean or a point", plAt(j, k))
			}
			switch pl.Type {
			case ReportOperatingState:
				s, ok := v.(string)
				if !ok {
					return vtn.ReportedResource{}, badRequest("%s.values[0]: an OPERATING_STATE is a string", plAt(j, k))
				}
				rr.States = append(rr.States, vtn.ReportedState{State: s, Loc: payloadLoc(i, j, k)})
			case ReportUsage:
				f, ok := v.(float64)
				if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
					return vtn.ReportedResource{}, badRequest("%s.values[0]: a USAGE is a number (kWh)", plAt(j, k))
				}
				start, end, err := intervalTimes(period, iv.IntervalPeriod, j)
				if err != nil {
					return vtn.ReportedResource{}, badRequest("%s: %v", ivAt(j), err)
				}
				rr.Usage = append(rr.Usage, vtn.ReportedUsage{Start: start, End: end, KWh: f * kwh, Loc: payloadLoc(i, j, k)})
			default:
				return vtn.ReportedResource{}, badRequest("%s.type must be %s or %s", plAt(j, k), ReportOperatingState, ReportUsage)
			}
		}
	}
	return rr, nil
}

// payloadLoc is where the k-th payload's value of a report's i-th resource's j-th interval is.
func payloadLoc(i, j, k int) []any {
	return []any{"body", "resources", i, "intervals", j, "payloads", k, "values", 0}
}

// intervalTimes is the j-th interval's span: its own intervalPeriod, else the resource's,
// whose intervals follow one another from its start (each its duration long).
func intervalTimes(resource, own *oadr.IntervalPeriod, j int) (time.Time, time.Time, error) {
	p, k := own, 0
	if p == nil {
		p, k = resource, j
	}
	if p == nil || p.Duration == nil {
		return time.Time{}, time.Time{}, fmt.Errorf("a USAGE interval needs an intervalPeriod with a start and a duration")
	}
	d, exact, err := parseDuration(*p.Duration)
	if err != nil || !exact || d <= 0 {
		return time.Time{}, time.Time{}, fmt.Errorf("a USAGE interval's duration must be a positive length of time (PT30M)")
	}
	start := p.Start.Add(time.Duration(k) * d)
	return start, start.Add(d), nil
}

// reportShape is a stored report in the document's shape.
func reportShape(rep vtn.Report) (oadr.Report, error) {
	var body reportBody
	if err := json.Unmarshal(rep.Body, &body); err != nil {
		return oadr.Report{}, err
	}
	return reportAs(rep, body), nil
}

// reportAs is a report in the document's shape, its body (rep.Body) as read: the report the
// door has just written answered without reading its body again.
func reportAs(rep vtn.Report, body reportBody) oadr.Report {
	out := oadr.Report{Resources: body.Resources}
	id := rep.ID.String()
	created, modified := rep.Created.UTC(), rep.Modified.UTC()
	objectType := oadr.ReportObjectTypeREPORT
	out.Id, out.CreatedDateTime, out.ModificationDateTime, out.ObjectType = &id, &created, &modified, &objectType
	out.ProgramID, out.EventID, out.ClientName, out.PayloadDescriptors = rep.ProgramID, rep.EventID, rep.ReportClientName,
		body.PayloadDescriptors
	if rep.Name != "" {
		out.ReportName = &rep.Name
	}
	return out
}

func (d *Door) searchReports(r *http.Request, p *auth.Principal) (any, error) {
	s, err := parseSearch(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	in := vtn.ReportSearch{ProgramID: q.Get(fieldProgramID), EventID: q.Get("eventID"), ClientName: q.Get("clientName"),
		Skip: s.Skip, Limit: s.Limit}
	for field, v := range map[string]string{fieldProgramID: in.ProgramID, "eventID": in.EventID} {
		if v != "" {
			if err := checkObjectID(field, v); err != nil {
				return nil, err
			}
		}
	}
	if in.ClientName != "" {
		if err := checkText("clientName", in.ClientName); err != nil {
			return nil, err
		}
	}
	reports, err := d.VTN.Reports(r.Context(), p, in)
	if err != nil {
		return nil, err
	}
	out := make([]oadr.Report, len(reports))
	for i, rep := range reports {
		if out[i], err = reportShape(rep); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (d *Door) createReport(r *http.Request, p *auth.Principal) (any, error) {
	in, body, err := reportIn(r)
	if err != nil {
		return nil, err
	}
	rep, err := d.VTN.CreateReport(r.Context(), p, in)
	if err != nil {
		return nil, err
	}
	return web.WithStatus{Status: http.StatusCreated, Body: reportAs(rep, body)}, nil
}

func (d *Door) getReport(r *http.Request, p *auth.Principal) (any, error) {
	rep, err := d.VTN.Report(r.Context(), p, r.PathValue("reportID"))
	if err != nil {
		return nil, err
	}
	return reportShape(rep)
}

func (d *Door) updateReport(r *http.Request, p *auth.Principal) (any, error) {
	in, _, err := reportIn(r)
	if err != nil {
		return nil, err
	}
	rep, err := d.VTN.UpdateReport(r.Context(), p, r.PathValue("reportID"), in)
	if err != nil {
		return nil, err
	}
	return reportShape(rep)
}

func (d *Door) deleteReport(r *http.Request, p *auth.Principal) (any, error) {
	rep, err := d.VTN.DeleteReport(r.Context(), p, r.PathValue("reportID"))
	if err != nil {
		return nil, err
	}
	return reportShape(rep)
}

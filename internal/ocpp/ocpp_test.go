package ocpp_test

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/flexsite/flexsite/internal/evschedule"
	"github.com/flexsite/flexsite/internal/ocpp"
)

const hh = 30 * time.Minute

// schema compiles OCPP 1.6's published SetChargingProfile.req schema (testdata/README.md).
// Its root is the request itself — connectorId and csChargingProfiles — which is what prod's
// SetChargingProfileRequest and Profile answer. The OCPP 1.6 schemas are draft-04; formats
// (date-time) are asserted.
func schema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("testdata/ocpp-1.6-SetChargingProfile.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	c.AssertFormat()
	if err := c.AddResource("urn:OCPP:1.6:SetChargingProfileRequest", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("urn:OCPP:1.6:SetChargingProfileRequest")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func validate(t *testing.T, sch *jsonschema.Schema, req ocpp.SetChargingProfileRequest) []byte {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Fatalf("%s\ndoes not validate: %v", body, err)
	}
	return body
}

// The schema is not a formality: a profile it should refuse, it refuses.
func TestSchemaRefuses(t *testing.T) {
	sch := schema(t)
	for name, body := range map[string]string{
		"no connectorId":        `{"csChargingProfiles": {"chargingProfileId": 1, "stackLevel": 0, "chargingProfilePurpose": "TxProfile", "chargingProfileKind": "Absolute", "chargingSchedule": {"chargingRateUnit": "W", "chargingSchedulePeriod": []}}}`,
		"a limit of 7400.05":    `{"connectorId": 1, "csChargingProfiles": {"chargingProfileId": 1, "stackLevel": 0, "chargingProfilePurpose": "TxProfile", "chargingProfileKind": "Absolute", "chargingSchedule": {"chargingRateUnit": "W", "chargingSchedulePeriod": [{"startPeriod": 0, "limit": 7400.05}]}}}`,
		"a unit of kW":          `{"connectorId": 1, "csChargingProfiles": {"chargingProfileId": 1, "stackLevel": 0, "chargingProfilePurpose": "TxProfile", "chargingProfileKind": "Absolute", "chargingSchedule": {"chargingRateUnit": "kW", "chargingSchedulePeriod": []}}}`,
		"validFrom not a time":  `{"connectorId": 1, "csChargingProfiles": {"chargingProfileId": 1, "stackLevel": 0, "chargingProfilePurpose": "TxProfile", "chargingProfileKind": "Absolute", "validFrom": "tomorrow", "chargingSchedule": {"chargingRateUnit": "W", "chargingSchedulePeriod": []}}}`,
		"an unknown root field": `{"connectorId": 1, "extra": 1, "csChargingProfiles": {"chargingProfileId": 1, "stackLevel": 0, "chargingProfilePurpose": "TxProfile", "chargingProfileKind": "Absolute", "chargingSchedule": {"chargingRateUnit": "W", "chargingSchedulePeriod": []}}}`,
	} {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		if sch.Validate(v) == nil {
			t.Errorf("%s: validates", name)
		}
	}
}

// checkSemantics checks what the schema cannot: the profile is the schedule. It starts at 0,
// its periods strictly increase and each changes the limit, the limit at every second of the
// profile is powerW inside a block and 0 outside, and the duration runs from the window's start
// to its end (or the last block's, if later). Limits have at most one decimal.
func checkSemantics(t *testing.T, name string, req ocpp.SetChargingProfileRequest, s evschedule.Schedule, powerW int64) {
	t.Helper()
	p := req.CSChargingProfiles
	cs := p.ChargingSchedule
	if p.ChargingProfilePurpose != "TxProfile" || p.ChargingProfileKind != "Absolute" || cs.ChargingRateUnit != "W" || req.ConnectorID != 1 {
		t.Fatalf("%s: not a TxProfile, Absolute, in W on connector 1: %+v", name, req)
	}
	if p.ChargingProfileID < 1 || p.ChargingProfileID > math.MaxInt32 {
		t.Fatalf("%s: profile id %d is not a positive 32-bit integer", name, p.ChargingProfileID)
	}
	start := s.WindowStart
	end := s.WindowEnd
	for _, b := range s.Blocks {
		if b.End.After(end) {
			end = b.End
		}
	}
	if cs.StartSchedule == nil || !cs.StartSchedule.Equal(start) || p.ValidFrom == nil || !p.ValidFrom.Equal(start) {
		t.Fatalf("%s: starts %v (valid from %v), want %s", name, cs.StartSchedule, p.ValidFrom, start)
	}
	if cs.Duration == nil || *cs.Duration != int(end.Sub(start)/time.Second) || p.ValidTo == nil || !p.ValidTo.Equal(end) {
		t.Fatalf("%s: duration %v (valid to %v), want %s to %s", name, cs.Duration, p.ValidTo, start, end)
	}
	checkPeriods(t, name, cs, s, start, end, powerW)
}

// checkPeriods checks the periods: from 0, strictly increasing, each changing the limit, one
// decimal at most, and the limit in force at each minute powerW inside a block, 0 outside.
func checkPeriods(t *testing.T, name string, cs ocpp.ChargingSchedule, s evschedule.Schedule, start, end time.Time, powerW int64) {
	t.Helper()
	ps := cs.ChargingSchedulePeriod
	if len(ps) == 0 || ps[0].StartPeriod != 0 {
		t.Fatalf("%s: the first period does not start at 0: %+v", name, ps)
	}
	for i, q := range ps {
		if math.Abs(q.Limit*10-math.Round(q.Limit*10)) > 1e-9 {
			t.Fatalf("%s: limit %v has more than one decimal", name, q.Limit)
		}
		if i > 0 && (q.StartPeriod <= ps[i-1].StartPeriod || q.Limit == ps[i-1].Limit) {
			t.Fatalf("%s: periods %d and %d: %+v", name, i-1, i, ps)
		}
		if q.StartPeriod >= *cs.Duration {
			t.Fatalf("%s: period %d starts at or after the end: %+v", name, i, ps)
		}
	}
	// The limit in force at each minute (and at each block edge) against the blocks.
	check := func(off time.Duration) {
		at := start.Add(off)
		want := 0.0
		for _, b := range s.Blocks {
			if !at.Before(b.Start) && at.Before(b.End) {
				want = float64(powerW)
			}
		}
		got := ps[0].Limit
		for _, q := range ps {
			if q.StartPeriod <= int(off/time.Second) {
				got = q.Limit
			}
		}
		if got != want {
			t.Fatalf("%s: limit %v at %s, want %v (blocks %+v, periods %+v)", name, got, at, want, s.Blocks, ps)
		}
	}
	for off := time.Duration(0); off < end.Sub(start); off += time.Minute {
		check(off)
	}
}

func TestExample(t *testing.T) {
	sch := schema(t)
	for _, now := range []time.Time{
		time.Date(2026, 11, 27, 10, 7, 0, 0, time.UTC),
		time.Date(2026, 10, 23, 12, 0, 0, 0, time.UTC), // the example's night is the clocks going back
		time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC),  // … and the clocks going forward
		time.Date(2026, 12, 31, 23, 59, 0, 0, time.UTC),
	} {
		req := ocpp.Example(now)
		validate(t, sch, req)
		p := req.CSChargingProfiles.ChargingSchedule.ChargingSchedulePeriod
		// Plugged in at 22:00 the next evening, charging two hours from 01:00 at 7.4 kW (on the
		// night the clocks go back, 01:00 is the second one's), ready by 07:00.
		if len(p) != 3 || p[0].Limit != 0 || p[1].Limit != 7400 || p[2].Limit != 0 || p[2].StartPeriod-p[1].StartPeriod != 7200 {
			t.Errorf("%s: periods %+v", now, p)
		}
		start := *req.CSChargingProfiles.ChargingSchedule.StartSchedule
		if l := start.In(time.FixedZone("", 0)); start.After(now.Add(48*time.Hour)) || !start.After(now) || l.IsZero() {
			t.Errorf("%s: the example starts %s", now, start)
		}
	}
	a, b := ocpp.Example(time.Date(2026, 11, 27, 10, 7, 0, 0, time.UTC)), ocpp.Example(time.Date(2026, 11, 27, 18, 0, 0, 0, time.UTC))
	if a.CSChargingProfiles.ChargingProfileID != b.CSChargingProfiles.ChargingProfileID {
		t.Errorf("the same night's example has two profile ids")
	}
}

// Worked examples: a schedule as the rule answers it (sorted, merged blocks inside the window),
// and one the rule hands back unchanged — the device's own request, which may be unsorted, touch,
// overlap or run past an earlier ready-by.
func TestProfileWorkedExamples(t *testing.T) {
	sch := schema(t)
	d := func(h, m int) time.Time {
		return time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC).Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
	}
	for _, tc := range []struct {
		name string
		s    evschedule.Schedule
		want []ocpp.ChargingSchedulePeriod
	}{
		{"rescheduled", evschedule.Schedule{WindowStart: d(0, 0), WindowEnd: d(9, 0), Changed: true,
			Blocks: []evschedule.Block{{Start: d(0, 30), End: d(1, 0)}, {Start: d(3, 0), End: d(5, 0)}}},
			[]ocpp.ChargingSchedulePeriod{{0, 0, nil}, {1800, 7400, nil}, {3600, 0, nil}, {3 * 3600, 7400, nil}, {5 * 3600, 0, nil}}},
		{"a block from the window's start to its end", evschedule.Schedule{WindowStart: d(0, 0), WindowEnd: d(2, 0), Changed: true,
			Blocks: []evschedule.Block{{Start: d(0, 0), End: d(2, 0)}}},
			[]ocpp.ChargingSchedulePeriod{{0, 7400, nil}}},
		// Unchanged: the device's blocks, out of order and touching; 22:10 is inside the
		// window that starts at 22:00.
		{"unchanged, unsorted and touching", evschedule.Schedule{WindowStart: d(0, 0), WindowEnd: d(2, 0),
			Blocks: []evschedule.Block{{Start: d(1, 0), End: d(1, 30)}, {Start: d(0, 10), End: d(1, 0)}}},
			[]ocpp.ChargingSchedulePeriod{{0, 0, nil}, {600, 7400, nil}, {5400, 0, nil}}},
		// Unchanged: ready by 23:00 but the device asked to charge to 23:40 — the profile
		// carries the request whole, so the car charges as it was answered.
		{"unchanged, past the ready-by", evschedule.Schedule{WindowStart: d(0, 0), WindowEnd: d(1, 0),
			Blocks: []evschedule.Block{{Start: d(0, 0), End: d(1, 40)}}},
			[]ocpp.ChargingSchedulePeriod{{0, 7400, nil}}},
		{"unchanged, overlapping", evschedule.Schedule{WindowStart: d(0, 0), WindowEnd: d(3, 0),
			Blocks: []evschedule.Block{{Start: d(0, 0), End: d(1, 0)}, {Start: d(0, 30), End: d(1, 30)}}},
			[]ocpp.ChargingSchedulePeriod{{0, 7400, nil}, {5400, 0, nil}}},
	} {
		req := ocpp.Profile("asset-1", tc.s, 7400)
		validate(t, sch, req)
		checkSemantics(t, tc.name, req, tc.s, 7400)
		got := req.CSChargingProfiles.ChargingSchedule.ChargingSchedulePeriod
		if len(got) != len(tc.want) {
			t.Errorf("%s: periods %+v, want %+v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i].StartPeriod != tc.want[i].StartPeriod || got[i].Limit != tc.want[i].Limit {
				t.Errorf("%s: periods %+v, want %+v", tc.name, got, tc.want)
				break
			}
		}
	}
}

// Random schedules, rescheduled by the rule and handed back unchanged, at random powers: every
// profile validates against OCPP's schema and is the schedule.
func TestProfileOfRandomSchedules(t *testing.T) {
	sch := schema(t)
	rng := rand.New(rand.NewPCG(36, 16))
	for c := 0; c < 1000; c++ {
		start := time.Date(2026, 10, 24, 18, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(400)) * hh)
		n := 1 + rng.IntN(30)
		s := evschedule.Schedule{WindowStart: start, WindowEnd: start.Add(time.Duration(n) * hh), Changed: rng.IntN(2) == 0}
		if s.Changed {
			// The rule's answer: chosen half-hours, merged.
			for i := 0; i < n; i++ {
				if rng.IntN(3) == 0 {
					t0 := start.Add(time.Duration(i) * hh)
					if k := len(s.Blocks) - 1; k >= 0 && s.Blocks[k].End.Equal(t0) {
						s.Blocks[k].End = t0.Add(hh)
					} else {
						s.Blocks = append(s.Blocks, evschedule.Block{Start: t0, End: t0.Add(hh)})
					}
				}
			}
		} else {
			// A device's request: any minutes, any order, perhaps past the window.
			for range 1 + rng.IntN(3) {
				b := start.Add(time.Duration(rng.IntN(n*30)) * time.Minute)
				s.Blocks = append(s.Blocks, evschedule.Block{Start: b, End: b.Add(time.Duration(1+rng.IntN(120)) * time.Minute)})
			}
		}
		powerW := int64(1 + rng.IntN(22000))
		req := ocpp.Profile("asset", s, powerW)
		validate(t, sch, req)
		checkSemantics(t, "random", req, s, powerW)
	}
}

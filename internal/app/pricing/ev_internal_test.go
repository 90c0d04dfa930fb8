package pricing

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/asseteventstore"
)

func TestCheckRequested(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	b := func(from, to string) Block { return Block{Start: at(from), End: at(to)} }
	many := make([]Block, MaxScheduleBlocks+1)
	for i := range many {
		start := at("2027-01-14T00:00:00Z").Add(time.Duration(i) * 30 * time.Minute)
		many[i] = Block{Start: start, End: start.Add(15 * time.Minute)}
	}
	cases := []struct {
		name   string
		blocks []Block
		loc    []any // nil: accepted
	}{
		{"one block", []Block{b("2027-01-14T22:00:00Z", "2027-01-14T23:00:00Z")}, nil},
		{"out of order, touching", []Block{b("2027-01-14T23:00:00Z", "2027-01-15T00:00:00Z"), b("2027-01-14T22:00:00Z", "2027-01-14T23:00:00Z")}, nil},
		{"exactly 48 hours", []Block{b("2027-01-14T00:00:00Z", "2027-01-14T01:00:00Z"), b("2027-01-15T23:00:00Z", "2027-01-16T00:00:00Z")}, nil},
		{"48 blocks", many[:MaxScheduleBlocks], nil},
		{"none", nil, []any{"body", "charging_schedule"}},
		{"49 blocks", many, []any{"body", "charging_schedule"}},
		{"empty block", []Block{b("2027-01-14T22:00:00Z", "2027-01-14T22:00:00Z")}, []any{"body", "charging_schedule", 0, "end_timestamp"}},
		{"overlap named at the later block", []Block{b("2027-01-14T22:30:00Z", "2027-01-14T23:30:00Z"), b("2027-01-14T22:00:00Z", "2027-01-14T23:00:00Z")},
			[]any{"body", "charging_schedule", 0, "start_timestamp"}},
		{"over 48 hours", []Block{b("2027-01-14T00:00:00Z", "2027-01-14T01:00:00Z"), b("2027-01-15T23:00:00Z", "2027-01-16T00:00:01Z")},
			[]any{"body", "charging_schedule"}},
	}
	for _, c := range cases {
		err := CheckRequested(c.blocks)
		if c.loc == nil {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		e := app.As(err)
		if e == nil || e.Kind != app.Invalid {
			t.Errorf("%s: got %v, want a 422", c.name, err)
			continue
		}
		items := e.Detail.([]app.FieldError)
		got, _ := json.Marshal(items[0].Loc)
		want, _ := json.Marshal(c.loc)
		if string(got) != string(want) {
			t.Errorf("%s: at %s, want %s", c.name, got, want)
		}
	}
}

func TestScheduleIntentAndTariff(t *testing.T) {
	wall := func(l asseteventstore.Latest) string {
		in := scheduleIntent(l)
		if in == nil || in.ReadyBy == nil {
			return "none"
		}
		return in.ReadyBy.String()
	}
	cases := []struct {
		name, intent, want string
	}{
		{"no intent", "", "none"},
		{"ready_by_local_time wins", `{"ready_by": "2027-01-15T06:00:00Z", "ready_by_local_time": "07:30:00"}`, "7h30m0s"},
		{"ready_by's own wall time", `{"ready_by": "2027-07-15T07:00:00+01:00"}`, "7h0m0s"},
		{"neither", `{"energy_required_kwh": 3}`, "none"},
	}
	for _, c := range cases {
		l := asseteventstore.Latest{}
		if c.intent != "" {
			l.Intent = json.RawMessage(c.intent)
		}
		if got := wall(l); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if in := scheduleIntent(asseteventstore.Latest{Intent: json.RawMessage(`{"may_charge_peak": true}`)}); in == nil || !in.MayChargePeak {
		t.Errorf("may_charge_peak not read: %+v", in)
	}
	tariff := scheduleTariff(asseteventstore.Latest{Tariff: json.RawMessage(`{"off_peak_times": "00:00-05:30, 23:30-24:00", "timezone": "Europe/Paris"}`)})
	if tariff == nil || len(tariff.OffPeak) != 2 || tariff.Zone.String() != "Europe/Paris" {
		t.Errorf("tariff: %+v", tariff)
	}
	if scheduleTariff(asseteventstore.Latest{Tariff: json.RawMessage(`{"off_peak_times": "Mo-Fr 00:00-07:00", "timezone": "UTC"}`)}) != nil {
		t.Error("a tariff outside the subset read as one")
	}
}

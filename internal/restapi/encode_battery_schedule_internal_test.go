package restapi

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/app/pricing"
	"github.com/flexsite/flexsite/internal/batteryschedule"
)

// The battery schedule's Appender writes what encoding/json's Encoder writes, byte for byte.
func TestBatteryScheduleAnswerMatchesEncodingJSON(t *testing.T) {
	start := time.Date(2026, 11, 27, 17, 30, 0, 0, time.UTC)
	london, err := time.LoadLocation("Europe/London")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]pricing.BatteryScheduleResponse{
		"no steps": {ScheduleSteps: []pricing.BatteryScheduleStep{}, ScheduleLastUpdated: start},
		"steps, microseconds in the last update": {ScheduleSteps: []pricing.BatteryScheduleStep{
			{Start: start, End: start.Add(time.Hour), Action: batteryschedule.ChargeMax, AllowDeviation: true},
			{Start: start.Add(time.Hour), End: start.Add(5 * time.Hour), Action: batteryschedule.AvoidExport},
			{Start: start.Add(5 * time.Hour), End: start.Add(6 * time.Hour), Action: batteryschedule.DischargeMax},
		}, ScheduleLastUpdated: time.Date(2026, 11, 27, 9, 1, 2, 345678000, time.UTC)},
		"not UTC, an action needing escapes": {ScheduleSteps: []pricing.BatteryScheduleStep{
			{Start: start.In(london), End: start.Add(time.Hour).In(london), Action: "<avoid&import>"},
		}, ScheduleLastUpdated: time.Date(2026, 6, 1, 12, 0, 0, 1, london)},
	}
	for name, in := range cases {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(in); err != nil {
			t.Fatal(err)
		}
		if got := batteryScheduleAnswer(in).AppendJSON(nil); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want.Bytes())
		}
	}
}

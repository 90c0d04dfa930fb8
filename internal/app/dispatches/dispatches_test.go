package dispatches

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flexsite/flexsite/internal/dispatch"
)

func TestReportedStatus(t *testing.T) {
	for _, c := range []struct {
		in   string
		want dispatch.Status
		ok   bool
	}{
		{"RECEIVED", dispatch.Received, true}, {"ACCEPTED", dispatch.Accepted, true}, {"REJECTED", dispatch.Rejected, true},
		{"FAILED", dispatch.Failed, true}, {"EXECUTED", dispatch.Executed, true},
		{"accepted", "", false}, {"Accepted", "", false}, {"REQUESTED", "", false}, {"CANCELLED", "", false}, {"", "", false},
	} {
		got, ok := ReportedStatus(c.in)
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("ReportedStatus(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	for _, s := range EventStatuses {
		st, ok := ReportedStatus(s)
		if !ok || EventStatus(st) != s {
			t.Errorf("%s does not read back as itself", s)
		}
	}
}

func TestExample(t *testing.T) {
	now := time.Date(2026, 11, 27, 14, 7, 31, 500, time.UTC)
	ev := Example(now, "https://flexsite.example")
	if _, err := uuid.Parse(ev.EventID); err != nil {
		t.Errorf("event_id %q: %v", ev.EventID, err)
	}
	if _, err := uuid.Parse(ev.AssetID); err != nil {
		t.Errorf("asset_id %q: %v", ev.AssetID, err)
	}
	if ev.IssuedTimestamp != "2026-11-27T14:07:31Z" || ev.FromTime != "2026-11-28T15:00:00Z" || ev.ToTime != "2026-11-28T16:00:00Z" {
		t.Errorf("times: %+v", ev)
	}
	if ev.LevelKW != 5 || ev.MarketID != "limited_pause" {
		t.Errorf("level and market: %+v", ev)
	}
	if want := "https://flexsite.example/entities/asset/" + ev.AssetID + "/callback/" + ev.EventID; ev.UpdateStatusCallback != want ||
		!strings.HasPrefix(ev.UpdateStatusCallback, "https://") {
		t.Errorf("callback %q, want %q", ev.UpdateStatusCallback, want)
	}
}

package asseteventstore_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/asseteventstore"
	"github.com/flexsite/flexsite/internal/db/dbtest"
)

var testDB *dbtest.Database

func TestMain(m *testing.M) {
	dbtest.Main(m, &testDB)
}

func TestLatestInOneQuery(t *testing.T) {
	ctx := context.Background()
	s := &asseteventstore.Store{Pool: testDB.Pool}
	at := time.Date(2026, 7, 1, 17, 0, 0, 0, time.UTC)
	end := at.Add(time.Hour)
	for i, ev := range []asseteventstore.Event{
		{AssetID: "a1", Type: asseteventstore.PlugIn, Intent: json.RawMessage(`{"energy_required_kwh": 20}`)},
		{AssetID: "a1", Type: asseteventstore.ChargeNow, EndAt: &end},
		{AssetID: "a1", Type: asseteventstore.PlugOut},
		{AssetID: "a1", Type: asseteventstore.TariffUpdate, Tariff: json.RawMessage(`{"off_peak_times": "00:00-07:00", "timezone": "Europe/London"}`)},
		{AssetID: "a2", Type: asseteventstore.ChargeNow, EndAt: &end},
		{AssetID: "a2", Type: asseteventstore.ChargeNowDeleted},
		{AssetID: "a1", Type: asseteventstore.PlugOut},
	} {
		ev.ReceivedAt, ev.RecordedBy = at.Add(time.Duration(i)*time.Minute), "client"
		org := "org-a"
		if err := s.Append(ctx, org, ev); err != nil {
			t.Fatal(err)
		}
		// Another organisation's events about the same asset id say nothing of org-a's.
		ev.Type = asseteventstore.PlugIn
		if err := s.Append(ctx, "org-b", ev); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Latest(ctx, "org-a", []string{"a1", "a2", "a3"})
	if err != nil {
		t.Fatal(err)
	}
	a1, a2 := got["a1"], got["a2"]
	if _, ok := got["a3"]; ok || len(got) != 2 {
		t.Errorf("an asset with no events has no entry: %v", got)
	}
	if a1.Plug != asseteventstore.PlugOut || !a1.DeviceState().PluggedOut || !a1.DeviceState().ChargeNowUntil.Equal(end) {
		t.Errorf("a1: %+v", a1)
	}
	if string(a1.Intent) != `{"energy_required_kwh": 20}` || !a1.IntentAt.Equal(at) || !a1.TariffAt.Equal(at.Add(3*time.Minute)) {
		t.Errorf("a1's intent and tariff: %+v", a1)
	}
	if a2.ChargeNow != asseteventstore.ChargeNowDeleted || !a2.DeviceState().ChargeNowUntil.IsZero() || a2.DeviceState().PluggedOut {
		t.Errorf("a2: a deleted charge-now is over: %+v", a2)
	}
}

// Events past their retention are deleted unless they still say their asset's state: the
// latest plug, charge-now, intent and tariff stay however old, and Latest answers the same.
func TestDeleteExpiredKeepsTheLatestState(t *testing.T) {
	ctx := context.Background()
	s := &asseteventstore.Store{Pool: testDB.Pool}
	now := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	old := now.AddDate(0, -asseteventstore.RetentionMonths, -1)
	end := old.Add(time.Hour)
	for i, ev := range []asseteventstore.Event{
		// Deleted: its plug and its intent were both told again since.
		{Type: asseteventstore.PlugIn, Intent: json.RawMessage(`{"energy_required_kwh": 10}`)},
		// Kept: the latest plug event, however old (the asset is still unplugged).
		{Type: asseteventstore.PlugOut},
		// Deleted: a charge-now ended by its deletion; kept: the deletion.
		{Type: asseteventstore.ChargeNow, EndAt: &end},
		{Type: asseteventstore.ChargeNowDeleted},
		// Deleted: a tariff replaced by the recent one below; kept: the latest intent, recent.
		{Type: asseteventstore.TariffUpdate, Tariff: json.RawMessage(`{"off_peak_times": "00:00-05:00", "timezone": "Europe/London"}`)},
		{Type: asseteventstore.IntentUpdate, Intent: json.RawMessage(`{"energy_required_kwh": 20}`), ReceivedAt: now.AddDate(0, -1, 0)},
		{Type: asseteventstore.TariffUpdate, Tariff: json.RawMessage(`{"off_peak_times": "00:00-07:00", "timezone": "Europe/London"}`),
			ReceivedAt: now.AddDate(0, -1, 0)},
	} {
		ev.AssetID, ev.RecordedBy = "r1", "client"
		if ev.ReceivedAt.IsZero() {
			ev.ReceivedAt = old.Add(time.Duration(i) * time.Minute)
		}
		if err := s.Append(ctx, "org-r", ev); err != nil {
			t.Fatal(err)
		}
	}
	before, err := s.Latest(ctx, "org-r", []string{"r1"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := s.DeleteExpired(ctx, now)
	if err != nil || n != 3 {
		t.Fatalf("deleted %d, %v; want the 3 events that no longer say the asset's state", n, err)
	}
	after, err := s.Latest(ctx, "org-r", []string{"r1"})
	if err != nil {
		t.Fatal(err)
	}
	b, a := before["r1"], after["r1"]
	if a.Plug != asseteventstore.PlugOut || a.Plug != b.Plug || a.ChargeNow != b.ChargeNow || string(a.Intent) != string(b.Intent) ||
		string(a.Tariff) != string(b.Tariff) || !a.IntentAt.Equal(b.IntentAt) || !a.TariffAt.Equal(b.TariffAt) {
		t.Errorf("the asset's state changed with the sweep: before %+v, after %+v", b, a)
	}
	if n, err := s.DeleteExpired(ctx, now); err != nil || n != 0 {
		t.Errorf("a second sweep deleted %d, %v", n, err)
	}
}

package dispatch_test

import (
	"errors"
	"testing"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/dispatch"
)

func TestStep(t *testing.T) {
	for _, tc := range []struct {
		from, to dispatch.Status
		changed  bool
		err      error
	}{
		{dispatch.Requested, dispatch.Received, true, nil},
		{dispatch.Requested, dispatch.Accepted, true, nil},
		{dispatch.Requested, dispatch.Rejected, true, nil},
		{dispatch.Requested, dispatch.Executed, true, nil},
		{dispatch.Requested, dispatch.Failed, true, nil},
		{dispatch.Received, dispatch.Received, false, nil},
		{dispatch.Received, dispatch.Accepted, true, nil},
		{dispatch.Received, dispatch.Rejected, true, nil},
		{dispatch.Received, dispatch.Executed, true, nil},
		{dispatch.Accepted, dispatch.Executed, true, nil},
		{dispatch.Accepted, dispatch.Failed, true, nil},
		{dispatch.Accepted, dispatch.Accepted, false, nil},
		{dispatch.Accepted, dispatch.Received, false, dispatch.ErrStepBack},
		{dispatch.Accepted, dispatch.Rejected, false, dispatch.ErrStepBack},
		{dispatch.Executed, dispatch.Executed, false, nil},
		{dispatch.Executed, dispatch.Failed, false, dispatch.ErrFinal},
		{dispatch.Executed, dispatch.Accepted, false, dispatch.ErrFinal},
		{dispatch.Rejected, dispatch.Accepted, false, dispatch.ErrFinal},
		{dispatch.Failed, dispatch.Executed, false, dispatch.ErrFinal},
		{dispatch.Cancelled, dispatch.Received, false, dispatch.ErrFinal},
		{dispatch.Cancelled, dispatch.Executed, false, dispatch.ErrFinal},
	} {
		changed, err := dispatch.Step(tc.from, tc.to)
		if changed != tc.changed || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("Step(%s, %s) = %v, %v; want %v, %v", tc.from, tc.to, changed, err, tc.changed, tc.err)
		}
	}
	if _, err := dispatch.Step(dispatch.Requested, dispatch.Cancelled); err == nil {
		t.Error("cancelled is not a status an asset controller reports")
	}
}

func TestLevelKW(t *testing.T) {
	for _, tc := range []struct {
		t    flexv1.AssetType
		d    flexv1.FlexDirection
		want float64
	}{
		{flexv1.AssetTypeCharger, flexv1.FlexTurnDown, 0},
		{flexv1.AssetTypeCharger, flexv1.FlexTurnUp, -7.4},
		{flexv1.AssetTypeHeatPump, flexv1.FlexTurnDown, 0},
		{flexv1.AssetTypeElectricVehicle, flexv1.FlexTurnUp, -7.4},
		{flexv1.AssetTypeBattery, flexv1.FlexTurnDown, 7.4},
		{flexv1.AssetTypeBattery, flexv1.FlexTurnUp, -7.4},
	} {
		if got := dispatch.LevelKW(tc.t, tc.d, 7400); got != tc.want {
			t.Errorf("LevelKW(%s, %s) = %v, want %v", tc.t, tc.d, got, tc.want)
		}
	}
}

func TestSkip(t *testing.T) {
	w := func(v int64) *int64 { return &v }
	start := time.Date(2026, 7, 1, 17, 0, 0, 0, time.UTC)
	rated := flexv1.AssetSpec{PowerW: w(7000)}
	for name, tc := range map[string]struct {
		spec  flexv1.AssetSpec
		state dispatch.DeviceState
		want  dispatch.SkipReason
	}{
		"asked: never reported a plug event":   {rated, dispatch.DeviceState{}, ""},
		"plugged out":                          {rated, dispatch.DeviceState{PluggedOut: true}, dispatch.NotPluggedIn},
		"charge now over the start":            {rated, dispatch.DeviceState{ChargeNowUntil: start.Add(time.Minute)}, dispatch.ChargeNow},
		"charge now ended at the start":        {rated, dispatch.DeviceState{ChargeNowUntil: start}, ""},
		"no rating":                            {flexv1.AssetSpec{}, dispatch.DeviceState{}, dispatch.NoPowerRating},
		"custom dispatch power without rating": {flexv1.AssetSpec{CustomDispatchPowerW: w(3000)}, dispatch.DeviceState{}, ""},
	} {
		got, skipped := dispatch.Skip(tc.spec, tc.state, start)
		if got != tc.want || skipped != (tc.want != "") {
			t.Errorf("%s: Skip = %q, %v; want %q", name, got, skipped, tc.want)
		}
	}
}

func TestIssueAtAndIdentity(t *testing.T) {
	created := time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC)
	if got := dispatch.IssueAt(created, created.Add(2*time.Hour)); !got.Equal(created) {
		t.Errorf("an event within 24 h is issued when created, got %s", got)
	}
	if got := dispatch.IssueAt(created, created.Add(72*time.Hour)); !got.Equal(created.Add(48 * time.Hour)) {
		t.Errorf("an event declared 3 days ahead is issued 24 h before its start, got %s", got)
	}
	a, b := dispatch.EventID("org-a", "ev", "asset"), dispatch.EventID("org-b", "ev", "asset")
	if a == b || a != dispatch.EventID("org-a", "ev", "asset") || a.Version() != 5 {
		t.Errorf("the dispatch id is a UUIDv5 of the organisation, the event and the asset: %s %s", a, b)
	}
	if !dispatch.Consents([]flexv1.DispatchMethod{"limited_pause"}, "limited_pause") ||
		dispatch.Consents([]flexv1.DispatchMethod{"cm_infrequent_dispatch"}, "limited_pause") {
		t.Error("consent covers a proposition its dispatch methods name")
	}
}

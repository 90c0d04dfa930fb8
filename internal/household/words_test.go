package household_test

import (
	"testing"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
)

func TestTransactionWords(t *testing.T) {
	for _, tc := range []struct {
		typ    flexv1.TransactionType
		status flexv1.PaymentStatus
		want   string
	}{
		{"flex period", "", "Reward for flexibility"},
		{"flex period top-up", "", "Reward for flexibility (top-up)"},
		{"flex event", "", "Flexibility event reward"},
		{"signup bonus", "", "Welcome bonus"},
		{"goodwill credit", "", "Goodwill credit"},
		{"correction", "", "Correction"},
		{"invoice paid", "", "Paid to your bill"},
		{"withdrawal", "", "Withdrawal"},
		{"withdrawal", "pending_approval", "Withdrawal (in progress)"},
		{"withdrawal", "approved", "Withdrawal (in progress)"},
		{"withdrawal", "processing", "Withdrawal (in progress)"},
		{"withdrawal", "posted", "Withdrawal (paid)"},
		{"withdrawal", "failed", "Withdrawal (not paid, returned to your balance)"},
		{"withdrawal", "rejected", "Withdrawal (not paid, returned to your balance)"},
		{"withdrawal", "cancelled", "Withdrawal (not paid, returned to your balance)"},
		{"withdrawal", "returned", "Withdrawal (not paid, returned to your balance)"},
		{"new kind", "", "Reward"},
	} {
		if got := household.TransactionWords(string(tc.typ), string(tc.status)); got != tc.want {
			t.Errorf("TransactionWords(%q, %q) = %q, want %q", tc.typ, tc.status, got, tc.want)
		}
	}
}

func TestDay(t *testing.T) {
	for _, tc := range []struct {
		at   time.Time
		want string
	}{
		// A summer evening's credit: 23:30 UTC is 00:30 BST the next day.
		{time.Date(2026, 6, 30, 23, 30, 0, 0, time.UTC), "1 July 2026"},
		{time.Date(2026, 6, 30, 22, 59, 0, 0, time.UTC), "30 June 2026"},
		// In winter the UK is on UTC.
		{time.Date(2026, 12, 31, 23, 30, 0, 0, time.UTC), "31 December 2026"},
		// A settlement date (midnight UTC) is the same day in the UK, summer or winter.
		{time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC), "1 July 2026"},
		{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), "1 January 2026"},
	} {
		if got := household.Day(tc.at); got != tc.want {
			t.Errorf("Day(%v) = %q, want %q", tc.at, got, tc.want)
		}
	}
}

func TestTransactionDay(t *testing.T) {
	evening, winter := "2026-06-30T23:30:00Z", "2026-12-31T23:30:00Z"
	for _, tc := range []struct {
		start      *string
		settlement string
		want       string
	}{
		{&evening, "2026-06-30", "1 July 2026"}, // the start, in UK time, before a date written in UTC
		{&winter, "", "31 December 2026"},
		{nil, "2026-07-01", "1 July 2026"},
		{nil, "", ""},
	} {
		if got := household.TransactionDay(tc.start, tc.settlement); got != tc.want {
			t.Errorf("TransactionDay(%v, %q) = %q, want %q", tc.start, tc.settlement, got, tc.want)
		}
	}
}

func TestDispatchWords(t *testing.T) {
	winter := time.Date(2026, 11, 17, 17, 30, 0, 0, time.UTC) // GMT: 17:30 in the UK
	summer := time.Date(2026, 6, 16, 16, 30, 0, 0, time.UTC)  // BST: 17:30 in the UK
	for _, tc := range []struct {
		typ     flexv1.AssetType
		levelKW float64
		from    time.Time
		want    string
	}{
		// Turn-down: a load pauses, a battery discharges.
		{flexv1.AssetTypeCharger, 0, winter, "Your charger was paused from 17:30 to 18:30"},
		{flexv1.AssetTypeCharger, 0, summer, "Your charger was paused from 17:30 to 18:30"},
		{flexv1.AssetTypeElectricVehicle, 0, winter, "Your electric vehicle was paused from 17:30 to 18:30"},
		{flexv1.AssetTypeHeatPump, 0, winter, "Your heat pump was paused from 17:30 to 18:30"},
		{flexv1.AssetTypeHotWaterTank, 0, winter, "Your hot water tank was paused from 17:30 to 18:30"},
		{flexv1.AssetTypeBattery, 5, winter, "Your battery was discharged from 17:30 to 18:30"},
		// Turn-up: a load draws its power, a battery charges.
		{flexv1.AssetTypeCharger, -7.4, winter, "Your charger charged from 17:30 to 18:30"},
		{flexv1.AssetTypeElectricVehicle, -11, summer, "Your electric vehicle charged from 17:30 to 18:30"},
		{flexv1.AssetTypeHeatPump, -3, winter, "Your heat pump was turned up from 17:30 to 18:30"},
		{flexv1.AssetTypeHotWaterTank, -3, winter, "Your hot water tank was turned up from 17:30 to 18:30"},
		{flexv1.AssetTypeBattery, -5, winter, "Your battery was charged from 17:30 to 18:30"},
		// Less than a watt is 0 kW.
		{flexv1.AssetTypeCharger, 0.0004, winter, "Your charger was paused from 17:30 to 18:30"},
		// An asset deleted since (no type), or of a type not dispatched: worded by its level.
		{"", 0, winter, "Your device was paused from 17:30 to 18:30"},
		{"", 5, winter, "Your device gave power to your home from 17:30 to 18:30"},
		{"", -5, winter, "Your device was turned up from 17:30 to 18:30"},
		{flexv1.AssetTypeBoundaryMeter, 0, winter, "Your device was paused from 17:30 to 18:30"},
	} {
		if got := household.DispatchWords(tc.typ, tc.levelKW, tc.from, tc.from.Add(time.Hour), false); got != tc.want {
			t.Errorf("DispatchWords(%q, %v, %v) = %q, want %q", tc.typ, tc.levelKW, tc.from, got, tc.want)
		}
	}
	// A window across UK midnight in summer: the times are the UK's, not UTC's.
	late := time.Date(2026, 6, 30, 22, 30, 0, 0, time.UTC)
	if got, want := household.DispatchWords(flexv1.AssetTypeCharger, 0, late, late.Add(time.Hour), false),
		"Your charger was paused from 23:30 to 00:30"; got != want {
		t.Errorf("across midnight: %q, want %q", got, want)
	}
	// While the window lasts, what the device is doing, not what it did.
	for _, tc := range []struct {
		typ     flexv1.AssetType
		levelKW float64
		want    string
	}{
		{flexv1.AssetTypeCharger, 0, "Your charger is paused until 18:30"},
		{flexv1.AssetTypeBattery, 5, "Your battery is discharging until 18:30"},
		{flexv1.AssetTypeBattery, -5, "Your battery is charging until 18:30"},
		{flexv1.AssetTypeElectricVehicle, -11, "Your electric vehicle is charging until 18:30"},
		{flexv1.AssetTypeHeatPump, -3, "Your heat pump is turned up until 18:30"},
		{"", 5, "Your device is giving power to your home until 18:30"},
	} {
		if got := household.DispatchWords(tc.typ, tc.levelKW, winter, winter.Add(time.Hour), true); got != tc.want {
			t.Errorf("ongoing DispatchWords(%q, %v) = %q, want %q", tc.typ, tc.levelKW, got, tc.want)
		}
	}
}

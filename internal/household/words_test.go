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

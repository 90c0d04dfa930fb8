package household

import (
	"time"

	"github.com/flexsite/flexsite/internal/settlement"
)

// The household's words: what both of its doors, the hosted flow (internal/hostedflow) and
// the rewards page (internal/rewardspage), call a transaction and how they write a day, so
// that the same credit reads the same on both.

// TransactionWords describes a reward transaction to its household: its type and, for a
// withdrawal, the state of its payment.
func TransactionWords(typ, paymentStatus string) string {
	switch typ {
	case "flex period":
		return "Reward for flexibility"
	case "flex period top-up":
		return "Reward for flexibility (top-up)"
	case "flex event":
		return "Flexibility event reward"
	case "signup bonus":
		return "Welcome bonus"
	case "goodwill credit":
		return "Goodwill credit"
	case "correction":
		return "Correction"
	case "invoice paid":
		return "Paid to your bill"
	case "withdrawal":
		switch paymentStatus {
		case "pending_approval", "approved", "processing":
			return "Withdrawal (in progress)"
		case "posted":
			return "Withdrawal (paid)"
		case "failed", "rejected", "cancelled", "returned":
			return "Withdrawal (not paid, returned to your balance)"
		}
		return "Withdrawal"
	default:
		return "Reward"
	}
}

// Day writes the UK local day of t as the household reads it, "1 July 2026": in
// settlement.London, the zone its credits are settled in, so a credit of a summer evening
// (23:30 UTC on 30 June is 00:30 on 1 July in the UK) shows on the day it was earned. A
// calendar date without a time (a settlement date) is its midnight UTC, which is the same day
// in the UK.
func Day(t time.Time) string { return t.In(settlement.London).Format("2 January 2006") }

// TransactionDay is the day a household's history shows a transaction on, from its record
// (start_time, RFC 3339, and settlement_date, YYYY-MM-DD, as the REST API answers them): the
// UK day of its start, else its settlement date; "" when it has neither.
func TransactionDay(startTime *string, settlementDate string) string {
	if startTime != nil {
		if at, err := time.Parse(time.RFC3339, *startTime); err == nil {
			return Day(at)
		}
	}
	if d, err := time.Parse(time.DateOnly, settlementDate); err == nil {
		return Day(d)
	}
	return settlementDate
}

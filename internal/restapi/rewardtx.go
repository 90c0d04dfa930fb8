package restapi

import (
	"encoding/json"
	"math"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/rewards"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/units"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
)

// creditTypes are the transaction types POST /rewards/{site_id}/transactions takes: every type
// but a withdrawal, which the household asks for on the rewards page.
var creditTypes = []flexv1.TransactionType{"flex period", "flex period top-up", "flex event", "invoice paid",
	"goodwill credit", "signup bonus", "correction"}

// parseCredit reads a transaction record without payment_status (POST
// /rewards/{site_id}/transactions). Times are RFC 3339 with a zone, stored to the second.
func parseCredit(f *fields, body map[string]any) rewards.CreditInput {
	loc := []any{"body"}
	var tx rewards.CreditInput
	if id, ok := f.Str(body, loc, "transaction_id", true); ok {
		if norm, err := validation.ParseUUID(id); err != nil {
			f.AddValidation(err, at(loc, "transaction_id"))
		} else {
			tx.ID = norm
		}
	}
	tx.Type, _ = web.Enum(f, body, loc, "transaction_type", true, creditTypes)
	if v, ok := f.Lookup(body, loc, "credit_pence", true); ok {
		n, isNum := v.(json.Number)
		pence, err := n.Int64()
		if !isNum || err != nil {
			f.Add("Input should be a valid integer", "int_type", at(loc, "credit_pence"))
		} else if !household.CreditInRange(pence) {
			f.Add("Input should be between -1000000000000 and 1000000000000", "less_than_equal", at(loc, "credit_pence"))
		} else {
			tx.CreditPence = pence
		}
	}
	tx.StartTime = parseStamp(f, body, loc, "start_time")
	tx.EndTime = parseStamp(f, body, loc, "end_time")
	if tx.StartTime != nil && tx.EndTime != nil && tx.EndTime.Before(tx.StartTime) {
		f.Add("end_time must not be before start_time", "value_error", at(loc, "end_time"))
	}
	if d, ok := f.Date(body, loc, "settlement_date", false); ok {
		tx.SettlementDate = d.Format(time.DateOnly)
	}
	if v, ok := f.Lookup(body, loc, "flex_kwh", false); ok {
		n, isNum := v.(json.Number)
		x, err := n.Float64()
		switch {
		case !isNum || err != nil:
			f.Add("Input should be a valid number", "float_type", at(loc, "flex_kwh"))
		case math.IsInf(x, 0) || math.IsNaN(x) || math.Abs(x) > units.MaxKilo:
			f.Add("Input should be a finite number", "finite_number", at(loc, "flex_kwh"))
		default:
			tx.FlexWh = units.FromKilo(&x)
		}
	}
	if _, ok := body["payment_status"]; ok {
		f.Add("payment_status is a withdrawal's; a credit has none", "extra_forbidden", at(loc, "payment_status"))
	}
	if tx.StartTime == nil && tx.SettlementDate == "" && len(f.Items()) == 0 {
		f.Add("start_time or settlement_date is required: the statement orders by when a transaction happened",
			"missing", at(loc, "start_time"))
	}
	return tx
}

// parseStamp reads an optional RFC 3339 time with a zone, to the second, in UTC.
func parseStamp(f *fields, body map[string]any, loc []any, key string) *metav1.Time {
	t, ok := f.Timestamp(body, loc, key, false)
	if !ok {
		return nil
	}
	if t.UTC().Year() < 1970 { // the ledger's own bound: it keeps seconds since 1970
		f.Add("Input should be greater than or equal to 1970-01-01T00:00:00Z", "greater_than_equal", at(loc, key))
		return nil
	}
	return &metav1.Time{Time: t.UTC().Truncate(time.Second)}
}

// createTransaction credits a site: 201 with the record, or 200 with the stored record when
// the same transaction was already stored (409 when with other fields).
func (a *API) createTransaction(r *http.Request, p *auth.Principal) (any, error) {
	f := &fields{}
	id := f.UUIDParam(r, "site_id")
	var in rewards.CreditInput
	if err := f.Join(readBody(r, func(bf *fields, body map[string]any) { in = parseCredit(bf, body) })); err != nil {
		return nil, err
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	rec, created, err := a.Rewards.Credit(r.Context(), p, id, in)
	if err != nil {
		return nil, err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return web.WithStatus{Status: status, Body: rec}, nil
}

// parsePaymentStatus reads {payment_status} (PATCH /rewards/{site_id}/transactions/{transaction_id}).
func parsePaymentStatus(f *fields, body map[string]any) flexv1.PaymentStatus {
	s, _ := web.Enum(f, body, []any{"body"}, "payment_status", true, household.PaymentTargets)
	for k := range body {
		if k != "payment_status" {
			f.Add("Extra inputs are not permitted", "extra_forbidden", []any{"body", k})
		}
	}
	return s
}

// patchTransaction moves a withdrawal's payment status on (role rewards_admin).
func (a *API) patchTransaction(r *http.Request, p *auth.Principal) (any, error) {
	f := &fields{}
	siteID := f.UUIDParam(r, "site_id")
	txID := f.UUIDParam(r, "transaction_id")
	var status flexv1.PaymentStatus
	if err := f.Join(readBody(r, func(bf *fields, body map[string]any) { status = parsePaymentStatus(bf, body) })); err != nil {
		return nil, err
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return a.Rewards.SetPaymentStatus(r.Context(), p, siteID, txID, status)
}

// queryTime reads an optional RFC 3339 query parameter (zero when absent).
func queryTime(f *fields, q map[string][]string, key string) time.Time {
	t, _ := f.QueryTimestamp(q, key)
	return t.UTC()
}

// transactionsQuery reads limit, offset, since and until: without limit (Limit 0), every
// transaction from offset on.
func transactionsQuery(f *fields, q map[string][]string) rewards.TransactionsQuery {
	out := rewards.TransactionsQuery{Paging: app.Paging{Limit: f.QueryInt(q, "limit", 0, 1, 1000),
		Offset: f.QueryInt(q, "offset", 0, 0, -1)}, Since: queryTime(f, q, "since"), Until: queryTime(f, q, "until")}
	if !out.Since.IsZero() && !out.Until.IsZero() && !out.Until.After(out.Since) {
		f.Add("until must be after since", "value_error", []any{"query", "until"})
	}
	return out
}

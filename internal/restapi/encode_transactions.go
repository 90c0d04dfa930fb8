package restapi

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/rewards"
	"github.com/flexsite/flexsite/internal/web"
)

// transactionsPage answers GET /rewards/{site_id}/transactions straight from the compact
// ledger: encoded as the TransactionsResponse of the same page (Response) would be
// (appendPage), with no record built in between.
type transactionsPage struct{ *rewards.TransactionsPage }

// AppendJSON writes the page (web.Appender).
func (p transactionsPage) AppendJSON(b []byte) []byte { return p.appendPage(b) }

// MarshalJSON encodes the page (for any encoder other than encodeJSON's).
func (p transactionsPage) MarshalJSON() ([]byte, error) {
	b := p.appendPage(nil)
	return b[:len(b)-1], nil // without the Encoder's newline
}

// appendPage writes the page as appendTransactions writes its TransactionsResponse. The
// ledger's canonical ids, and the times, dates and numbers formatted here (encode_fast.go),
// hold nothing to escape.
func (p transactionsPage) appendPage(b []byte) []byte {
	if p.Encoded != nil {
		b = append(b, p.Encoded...)
	} else {
		start := len(b)
		b = p.appendTransactionsArray(b)
		if p.Keep != nil {
			p.Keep(bytes.Clone(b[start:]))
		}
	}
	b = append(b, `,"is_below_withdrawal_minimum":`...)
	b = strconv.AppendBool(b, p.BelowMinimum)
	b = append(b, `,"days_until_minimum_wait_time_met":`...)
	b = strconv.AppendInt(b, int64(p.DaysUntilWaitMet), 10)
	return append(b, "}\n"...)
}

// appendTransactionsArray writes the page up to the end of its transactions array.
func (p transactionsPage) appendTransactionsArray(b []byte) []byte {
	l := p.Ledger
	// Start and end times walk the weeks of the statement; settlement dates walk their own
	// (a later month): one memo each, so neither makes the other work its date out again
	// (with one memo, working dates out was a fifth of encoding a page at 10,000 sites).
	var times, settlements dayMemo
	b = append(b, `{"site_id":`...)
	b = appendJSONString(b, p.SiteID)
	b = append(b, `,"transactions":[`...)
	for i := p.From; i < p.To; i++ {
		if i > p.From {
			b = append(b, ',')
		}
		tx, plain := l.At(i), l.Canonical(i)
		b = append(b, `{"transaction_id":`...)
		if plain {
			b = append(l.AppendID(append(b, '"'), i), '"')
		} else {
			b = appendJSONString(b, l.ID(i))
		}
		b = append(b, `,"credit_pence":`...)
		b = strconv.AppendInt(b, tx.CreditPence(), 10)
		if typ := tx.Type(); typ != "" {
			b = append(b, `,"transaction_type":`...)
			b = appendJSONString(b, string(typ))
		}
		if sec, ok := tx.StartUnix(); ok {
			b = append(times.appendRFC3339(append(b, `,"start_time":"`...), sec), '"')
		}
		if sec, ok := tx.EndUnix(); ok {
			b = append(times.appendRFC3339(append(b, `,"end_time":"`...), sec), '"')
		}
		if day, ok := tx.SettlementDay(); ok {
			b = append(settlements.appendDay(append(b, `,"settlement_date":"`...), day), '"')
		} else if d := l.SettlementDate(i); d != "" {
			b = appendJSONString(append(b, `,"settlement_date":`...), d)
		}
		if wh, ok := tx.FlexWh(); ok {
			b = appendKilo(append(b, `,"flex_kwh":`...), wh)
		}
		if ps := tx.PaymentStatus(); ps != "" {
			b = append(b, `,"payment_status":`...)
			b = appendJSONString(b, string(ps))
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendTransactions encodes a transactions answer as encoding/json's Encoder does (field
// order, omitempty, HTML-safe strings, floats, a trailing newline), without reflection: a
// page of a year of weekly rewards is the largest answer the read path serves, and this is
// about a third of the CPU goccy/go-json spent on it. TestEncodeJSONMatchesEncodingJSON
// holds it to encoding/json byte for byte.
func appendTransactions(b []byte, r *TransactionsResponse) []byte {
	b = append(b, `{"site_id":`...)
	b = appendJSONString(b, r.SiteID)
	b = append(b, `,"transactions":`...)
	if r.Transactions == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Transactions {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendTransactionRecord(b, &r.Transactions[i])
		}
		b = append(b, ']')
	}
	b = append(b, `,"is_below_withdrawal_minimum":`...)
	b = strconv.AppendBool(b, r.IsBelowWithdrawalMinimum)
	b = append(b, `,"days_until_minimum_wait_time_met":`...)
	b = strconv.AppendInt(b, int64(r.DaysUntilMinimumWaitTimeMet), 10)
	return append(b, "}\n"...)
}

func appendTransactionRecord(b []byte, t *TransactionRecord) []byte {
	b = append(b, `{"transaction_id":`...)
	b = appendJSONString(b, t.TransactionID)
	b = append(b, `,"credit_pence":`...)
	b = strconv.AppendInt(b, t.CreditPence, 10)
	if t.TransactionType != "" {
		b = append(b, `,"transaction_type":`...)
		b = appendJSONString(b, string(t.TransactionType))
	}
	if t.StartTime != nil {
		b = append(b, `,"start_time":`...)
		b = appendJSONString(b, *t.StartTime)
	}
	if t.EndTime != nil {
		b = append(b, `,"end_time":`...)
		b = appendJSONString(b, *t.EndTime)
	}
	if t.SettlementDate != "" {
		b = append(b, `,"settlement_date":`...)
		b = appendJSONString(b, t.SettlementDate)
	}
	if t.FlexKWh != nil {
		b = append(b, `,"flex_kwh":`...)
		b = appendJSONFloat(b, *t.FlexKWh)
	}
	if t.PaymentStatus != "" {
		b = append(b, `,"payment_status":`...)
		b = appendJSONString(b, string(t.PaymentStatus))
	}
	return append(b, '}')
}

// appendJSONString quotes s; anything but printable ASCII that needs no escaping (quotes,
// backslashes, the HTML characters <, > and &, control and non-ASCII bytes) goes through
// encoding/json, which escapes and repairs it as the Encoder does.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plainJSON[s[i]] {
			quoted, _ := json.Marshal(s) // a string always encodes
			return append(b, quoted...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plainJSON marks the bytes a JSON string holds as they are (HTML-safe, as the Encoder).
var plainJSON = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

// appendJSONFloat writes a float64 as encoding/json does (ES6 number formatting).
func appendJSONFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(b, "null"...) // encoding/json fails here; a ledger cannot hold either
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// transactionsAnswer is a TransactionsResponse written by appendTransactions (web.Appender).
type transactionsAnswer TransactionsResponse

// AppendJSON writes the answer.
func (t *transactionsAnswer) AppendJSON(b []byte) []byte {
	return appendTransactions(b, (*TransactionsResponse)(t))
}

// encodeJSON encodes an answer as encoding/json's Encoder does, through the encoders the
// large read answers take: a transactions answer by hand (appendTransactions), an eligibility
// record as the household use cases keep it (app.EncodeEligibility); every other answer
// through web.EncodeJSON. encode_internal_test holds them to encoding/json byte for byte.
func encodeJSON(buf *bytes.Buffer, body any) error {
	switch b := body.(type) {
	case TransactionsResponse:
		body = (*transactionsAnswer)(&b)
	case *EligibilityRecord:
		enc, err := app.EncodeEligibility(b)
		if err != nil {
			return err
		}
		body = enc
	}
	return web.EncodeJSON(buf, body)
}

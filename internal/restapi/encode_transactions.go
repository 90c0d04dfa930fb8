package restapi

import (
	"bytes"
	"context"
	"io"
	"strconv"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/rewards"
	"github.com/flexsite/flexsite/internal/web"
	"github.com/flexsite/flexsite/internal/web/jsonappend"
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
	return appendTransactionsTail(p.appendTransactionsArray(b), p.TransactionsPage)
}

// appendTransactionsArray writes the page up to the end of its transactions array.
func (p transactionsPage) appendTransactionsArray(b []byte) []byte {
	// Start and end times walk the weeks of the statement; settlement dates walk their own
	// (a later month): one memo each, so neither makes the other work its date out again
	// (with one memo, working dates out was a fifth of encoding a page at 10,000 sites).
	var memo dayMemos
	b = appendTransactionsHead(b, p.SiteID)
	b = memo.appendItems(b, p.TransactionsPage, false)
	return append(b, ']')
}

// appendTransactionsHead opens an answer: up to its transactions array's first item.
func appendTransactionsHead(b []byte, siteID string) []byte {
	b = append(b, `{"site_id":`...)
	b = jsonappend.String(b, siteID)
	return append(b, `,"transactions":[`...)
}

// appendTransactionsTail closes an answer after its transactions array.
func appendTransactionsTail(b []byte, p *rewards.TransactionsPage) []byte {
	b = append(b, `,"is_below_withdrawal_minimum":`...)
	b = strconv.AppendBool(b, p.BelowMinimum)
	b = append(b, `,"days_until_minimum_wait_time_met":`...)
	b = strconv.AppendInt(b, int64(p.DaysUntilWaitMet), 10)
	return append(b, "}\n"...)
}

// dayMemos are the memos of an answer's start times, end times and settlement dates: each
// walks its own weeks (a history's start and end times are a week apart, its settlements in
// a later month), so that none makes another work its date out again.
type dayMemos struct{ starts, ends, settlements jsonappend.DayMemo }

// appendItems writes the page's transactions (From..To of its Ledger) as items of the array;
// after says an item was written before them. Each constant text is written with the quote
// or key that follows it, so that an item is a dozen appends.
func (m *dayMemos) appendItems(b []byte, p *rewards.TransactionsPage, after bool) []byte {
	l, from := p.Ledger, p.From
	for i := from; i < p.To; i++ {
		if after || i > from {
			b = append(b, ',')
		}
		tx := l.At(i)
		if l.Canonical(i) {
			b = append(l.AppendID(append(b, `{"transaction_id":"`...), i), `","credit_pence":`...)
		} else {
			b = append(jsonappend.String(append(b, `{"transaction_id":`...), l.ID(i)), `,"credit_pence":`...)
		}
		b = strconv.AppendInt(b, tx.CreditPence(), 10)
		if typ := tx.Type(); typ != "" {
			b = jsonappend.String(append(b, `,"transaction_type":`...), string(typ))
		}
		if sec, ok := tx.StartUnix(); ok {
			b = append(m.starts.RFC3339(append(b, `,"start_time":"`...), sec), '"')
		}
		if sec, ok := tx.EndUnix(); ok {
			b = append(m.ends.RFC3339(append(b, `,"end_time":"`...), sec), '"')
		}
		if day, ok := tx.SettlementDay(); ok {
			b = append(m.settlements.Day(append(b, `,"settlement_date":"`...), day), '"')
		} else if d := l.SettlementDate(i); d != "" {
			b = jsonappend.String(append(b, `,"settlement_date":`...), d)
		}
		if wh, ok := tx.FlexWh(); ok {
			b = jsonappend.Kilo(append(b, `,"flex_kwh":`...), wh)
		}
		if ps := tx.PaymentStatus(); ps != "" {
			b = jsonappend.String(append(b, `,"payment_status":`...), string(ps))
		}
		b = append(b, '}')
	}
	return b
}

// transactionsStream answers the whole history when it is longer than one batch
// (rewards.TransactionsPage.Streamed): the head and the first batch (read before the status
// was sent), then each further batch as it is read, then the tail. It holds one batch and
// its encoding at a time, whatever the history's length.
type transactionsStream struct{ *rewards.TransactionsPage }

// StreamJSON writes the answer a batch at a time (web.Streamer): byte for byte what
// transactionsPage writes for the same transactions.
func (p transactionsStream) StreamJSON(ctx context.Context, w io.Writer) error {
	var memo dayMemos
	b := appendTransactionsHead(nil, p.SiteID)
	written := false
	for {
		b = memo.appendItems(b, p.TransactionsPage, written)
		written = written || p.To > p.From
		if _, err := w.Write(b); err != nil {
			return err
		}
		b = b[:0]
		more, err := p.Next(ctx)
		if err != nil {
			return err
		}
		if !more {
			break
		}
	}
	_, err := w.Write(appendTransactionsTail(append(b, ']'), p.TransactionsPage))
	return err
}

// appendTransactions encodes a transactions answer as encoding/json's Encoder does (field
// order, omitempty, HTML-safe strings, floats, a trailing newline), without reflection: a
// page of a year of weekly rewards is the largest answer the read path serves, and this is
// about a third of the CPU goccy/go-json spent on it. TestEncodeJSONMatchesEncodingJSON
// holds it to encoding/json byte for byte.
func appendTransactions(b []byte, r *TransactionsResponse) []byte {
	b = append(b, `{"site_id":`...)
	b = jsonappend.String(b, r.SiteID)
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
	b = jsonappend.String(b, t.TransactionID)
	b = append(b, `,"credit_pence":`...)
	b = strconv.AppendInt(b, t.CreditPence, 10)
	if t.TransactionType != "" {
		b = append(b, `,"transaction_type":`...)
		b = jsonappend.String(b, string(t.TransactionType))
	}
	if t.StartTime != nil {
		b = append(b, `,"start_time":`...)
		b = jsonappend.String(b, *t.StartTime)
	}
	if t.EndTime != nil {
		b = append(b, `,"end_time":`...)
		b = jsonappend.String(b, *t.EndTime)
	}
	if t.SettlementDate != "" {
		b = append(b, `,"settlement_date":`...)
		b = jsonappend.String(b, t.SettlementDate)
	}
	if t.FlexKWh != nil {
		b = append(b, `,"flex_kwh":`...)
		b = jsonappend.Float(b, *t.FlexKWh)
	}
	if t.PaymentStatus != "" {
		b = append(b, `,"payment_status":`...)
		b = jsonappend.String(b, string(t.PaymentStatus))
	}
	return append(b, '}')
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

package restapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/rewards"
	"github.com/flexsite/flexsite/internal/ledger"
	"github.com/flexsite/flexsite/internal/units"
)

// encodeJSON answers eligibility and transactions byte for byte as encoding/json would.
func TestEncodeJSONMatchesEncodingJSON(t *testing.T) {
	awkward := []string{"", "plain", `<script>&"quote"\back</script>`, "tab\tnew\nline\x00\x1f",
		"line\u2028sep\u2029", "unicode é 漢字 🙂", "bad utf-8 \xff\xfe"}
	f := func(v float64) *float64 { return &v }
	txs := make([]TransactionRecord, 0, 2*len(awkward)+11)
	for i, s := range awkward {
		txs = append(txs, TransactionRecord{TransactionID: s, CreditPence: int64(i*1000 - 3000),
			TransactionType: flexv1.TransactionType(s), StartTime: &awkward[i], SettlementDate: s,
			FlexKWh: f(float64(i) * 1.1), PaymentStatus: flexv1.PaymentStatus(s)},
			TransactionRecord{TransactionID: s})
	}
	// flex_kwh is always Wh / 1000 (units.ToKilo), so never below 1e-3 in magnitude but for 0:
	// goccy/go-json writes 1e-07 where encoding/json writes 1e-7, which no ledger can hold.
	for _, wh := range []int64{0, 1, -1, 7, 999, 1001, 123456789, -987654321, 1e15, math.MaxInt64, math.MinInt64} {
		txs = append(txs, TransactionRecord{FlexKWh: units.ToKilo(&wh), EndTime: &awkward[2]})
	}
	assets := make([]AssetEligibilityRecord, 0, len(awkward))
	for _, s := range awkward {
		assets = append(assets, AssetEligibilityRecord{AssetID: s, ExternalID: s,
			Propositions: []PropositionEligibilityRecord{
				{Proposition: flexv1.PropositionName(s), IsEligible: true, Issues: []flexv1.EligibilityIssue{}},
				{Proposition: "limited_pause", Issues: []flexv1.EligibilityIssue{flexv1.EligibilityIssue(s), "x"}},
				{Proposition: "price_curve"}}})
	}
	bodies := []any{
		TransactionsResponse{}, TransactionsResponse{SiteID: awkward[2], Transactions: []TransactionRecord{}},
		TransactionsResponse{SiteID: "id", Transactions: txs, IsBelowWithdrawalMinimum: true, DaysUntilMinimumWaitTimeMet: -3},
		&EligibilityRecord{}, &EligibilityRecord{SiteID: awkward[3], EligiblePropositions: []flexv1.PropositionName{}},
		&EligibilityRecord{SiteID: "id", SiteProperties: SitePropertiesRecord{HasMeterConsent: true},
			EligiblePropositions: []flexv1.PropositionName{"limited_pause", flexv1.PropositionName(awkward[4])}, Assets: assets},
		map[string]any{"detail": awkward[2]},
	}
	for i, body := range bodies {
		var want, got bytes.Buffer
		if err := json.NewEncoder(&want).Encode(body); err != nil {
			t.Fatal(err)
		}
		if err := encodeJSON(&got, body); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("body %d:\n got %s\nwant %s", i, got.String(), want.String())
		}
	}
}

func BenchmarkEncodeTransactions(b *testing.B) {
	s := "2026-01-15T10:30:00Z"
	kwh := 1.25
	body := TransactionsResponse{SiteID: "8c0e4a8e-4b7e-4d2a-9a53-1f0a7c3e2b11"}
	for range 52 {
		body.Transactions = append(body.Transactions, TransactionRecord{TransactionID: "8c0e4a8e-4b7e-4d2a-9a53-1f0a7c3e2b11",
			CreditPence: 120, TransactionType: "flex event", StartTime: &s, EndTime: &s, SettlementDate: "2026-01-20",
			FlexKWh: &kwh, PaymentStatus: "paid"})
	}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		_ = encodeJSON(&buf, body)
	}
}

// A page of a year of weekly rewards written from the compact ledger, as the read path
// answers a kept page: compare with `go test ./internal/restapi/ -run X -bench TransactionsPage -benchmem`.
func BenchmarkTransactionsPage(b *testing.B) {
	year := make([]flexv1.RewardTransaction, 52)
	start := time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC)
	for i := range year {
		from := start.AddDate(0, 0, 7*i)
		to := from.AddDate(0, 0, 7)
		wh := int64(1500 + 10*i)
		year[i] = flexv1.RewardTransaction{ID: fmt.Sprintf("3f1c2b6e-8a0d-4c47-9e1b-%012d", i), Type: "flex period",
			CreditPence: int64(20 + (i*37)%180), StartTime: &metav1.Time{Time: from}, EndTime: &metav1.Time{Time: to},
			SettlementDate: to.AddDate(0, 0, 5).Format(time.DateOnly), FlexWh: &wh}
	}
	l := ledger.New(year)
	page := transactionsPage{&rewards.TransactionsPage{SiteID: "8c0e4a8e-4b7e-4d2a-9a53-1f0a7c3e2b11", Ledger: l, To: l.Len()}}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		_ = encodeJSON(&buf, page)
	}
}

// transactionRecords answers each transaction of a compact ledger as the record of its
// fields would, in the ledger's order (newest first).
func TestTransactionRecordsKeepEveryField(t *testing.T) {
	zone := time.FixedZone("east", 5*3600+30*60)
	at := func(t time.Time) *metav1.Time { return &metav1.Time{Time: t} }
	wh := func(v int64) *int64 { return &v }
	txs := []flexv1.RewardTransaction{
		{ID: "a", Type: "flex event", CreditPence: 120, StartTime: at(time.Date(2026, 1, 15, 10, 30, 0, 123, time.UTC)),
			EndTime: at(time.Date(2026, 1, 15, 23, 0, 0, 0, zone)), SettlementDate: "2026-01-20", FlexWh: wh(1250), PaymentStatus: "paid"},
		{ID: "b", CreditPence: -500, Type: "withdrawal"},
		{ID: "c", EndTime: at(time.Date(12026, 1, 1, 0, 0, 0, 0, zone)), FlexWh: wh(-7)},
		{ID: "d", StartTime: at(time.Date(1999, 12, 31, 23, 59, 59, 0, zone)), FlexWh: wh(0)},
		{ID: "3f1c2b6e-8a0d-4c47-9e1b-2d5f7a9c0e13", StartTime: at(time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)),
			SettlementDate: "2025-03-09", CreditPence: 7},
	}
	byID := map[string]*flexv1.RewardTransaction{}
	for i := range txs {
		byID[txs[i].ID] = &txs[i]
	}
	l := ledger.New(txs)
	got := rewards.TransactionRecords(l, 0, l.Len())
	if len(got) != len(txs) {
		t.Fatalf("%d records for %d transactions", len(got), len(txs))
	}
	for i, rec := range got {
		tx := byID[rec.TransactionID]
		if tx == nil {
			t.Fatalf("record %d has id %q, of no transaction", i, rec.TransactionID)
		}
		want := TransactionRecord{TransactionID: tx.ID, CreditPence: tx.CreditPence, TransactionType: tx.Type,
			StartTime: app.FormatTime(tx.StartTime), EndTime: app.FormatTime(tx.EndTime), SettlementDate: tx.SettlementDate,
			FlexKWh: units.ToKilo(tx.FlexWh), PaymentStatus: tx.PaymentStatus}
		if !reflect.DeepEqual(rec, want) {
			t.Errorf("transaction %s:\n got %+v\nwant %+v", tx.ID, rec, want)
		}
	}
	if page := rewards.TransactionRecords(l, 1, 3); !reflect.DeepEqual(page, got[1:3]) {
		t.Errorf("records 1..3 are %+v, want %+v", page, got[1:3])
	}
	if empty, _ := json.Marshal(rewards.TransactionRecords(nil, 0, 0)); string(empty) != "[]" {
		t.Errorf("empty page answers %s, want []", empty)
	}
}

// A page written straight from the compact ledger reads as the TransactionsResponse of the
// same page encoded by encoding/json.
func TestTransactionsPageMatchesResponse(t *testing.T) {
	at := func(s string) *metav1.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Time{Time: v}
	}
	wh := func(v int64) *int64 { return &v }
	txs := []flexv1.RewardTransaction{
		{ID: "3f1c2b6e-8a0d-4c47-9e1b-2d5f7a9c0e13", Type: "flex period", CreditPence: 120, StartTime: at("2025-01-06T00:00:00Z"),
			EndTime: at("2025-01-13T00:00:00+05:30"), SettlementDate: "2025-01-18", FlexWh: wh(1500)},
		{ID: "ffffffff-0000-ffff-0000-ffffffffffff", Type: "withdrawal", CreditPence: -500, PaymentStatus: "failed"},
		{ID: `odd <id> & "quotes"`, SettlementDate: "2025-1-5", FlexWh: wh(-1)},
		{ID: "00000000-0000-0000-0000-000000000000", SettlementDate: "2024-02-29", FlexWh: wh(0), CreditPence: math.MaxInt64},
		{ID: "11111111-1111-1111-1111-111111111111", StartTime: at("1969-07-20T20:17:40Z"), SettlementDate: "bad\ndate"},
	}
	l := ledger.New(txs)
	// A year of weekly rewards across two year ends, each settled five days after its week:
	// start and end times and settlement dates cross months at different transactions.
	year := make([]flexv1.RewardTransaction, 0, 60)
	start := time.Date(2024, 12, 2, 0, 0, 0, 0, time.UTC)
	for i := range 60 {
		from := start.AddDate(0, 0, 7*i)
		year = append(year, flexv1.RewardTransaction{ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
			Type: "flex period", CreditPence: int64(100 + i), StartTime: &metav1.Time{Time: from},
			EndTime:        &metav1.Time{Time: from.AddDate(0, 0, 7).Add(-time.Second)},
			SettlementDate: from.AddDate(0, 0, 12).Format(time.DateOnly), FlexWh: wh(int64(1000 + 37*i))})
	}
	weekly := ledger.New(year)
	for _, page := range []*rewards.TransactionsPage{
		{SiteID: "weekly", Ledger: weekly, From: 0, To: weekly.Len()},
		{SiteID: "weekly", Ledger: weekly, From: 7, To: 40},
		{SiteID: "site", Ledger: l, From: 0, To: l.Len(), BelowMinimum: true, DaysUntilWaitMet: 3},
		{SiteID: "<site>", Ledger: l, From: 2, To: 4},
		{SiteID: "s", Ledger: l, From: l.Len(), To: l.Len(), DaysUntilWaitMet: -1},
		{SiteID: "none", Ledger: nil},
	} {
		p := transactionsPage{page}
		var want, got bytes.Buffer
		if err := json.NewEncoder(&want).Encode(page.Response()); err != nil {
			t.Fatal(err)
		}
		if err := encodeJSON(&got, p); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("page %d..%d:\n got %s\nwant %s", p.From, p.To, got.String(), want.String())
		}
		if m, _ := json.Marshal(p); string(m)+"\n" != want.String() {
			t.Errorf("MarshalJSON %s", m)
		}
		// Streamed (the whole history's answer), a page is written byte for byte the same.
		var streamed bytes.Buffer
		if err := (transactionsStream{page}).StreamJSON(context.Background(), &streamed); err != nil {
			t.Fatal(err)
		}
		if streamed.String() != want.String() {
			t.Errorf("streamed page %d..%d:\n got %s\nwant %s", p.From, p.To, streamed.String(), want.String())
		}
	}
}

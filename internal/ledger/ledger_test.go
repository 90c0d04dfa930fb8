package ledger

import (
	"testing"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
)

func at(s string) *metav1.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return &metav1.Time{Time: t}
}

func wh(v int64) *int64 { return &v }

// Every field comes back as stored, for canonical and odd ids and dates alike.
func TestNewKeepsEveryField(t *testing.T) {
	txs := []flexv1.RewardTransaction{
		{ID: "3f1c2b6e-8a0d-4c47-9e1b-2d5f7a9c0e13", Type: "flex period", CreditPence: 120,
			StartTime: at("2025-01-06T00:00:00Z"), EndTime: at("2025-01-13T00:00:00Z"), SettlementDate: "2025-01-18", FlexWh: wh(1500)},
		{ID: "ffffffff-ffff-ffff-ffff-ffffffffffff", Type: "withdrawal", CreditPence: -500, PaymentStatus: "posted",
			StartTime: at("2025-02-01T10:30:00.5+05:30")},
		{ID: "not-a-uuid", SettlementDate: "2025-1-5", FlexWh: wh(0)},
		{ID: "3F1C2B6E-8A0D-4C47-9E1B-2D5F7A9C0E13", SettlementDate: "1969-12-31", CreditPence: 1},
		// Beyond the packed ranges: times before 1970 and after 2106, a date after 2149.
		{ID: "00000000-0000-0000-0000-00000000000a", StartTime: at("1969-07-20T20:17:40Z"), EndTime: at("2107-01-01T00:00:00Z"),
			SettlementDate: "2150-01-01", FlexWh: wh(-1 << 40)},
		{ID: "00000000-0000-0000-0000-00000000000b", EndTime: at("2106-02-07T06:28:15Z"), SettlementDate: "2149-06-04"},
		{ID: "00000000-0000-0000-0000-00000000000c", StartTime: at("1970-01-01T00:00:00Z"), SettlementDate: "1970-01-01"},
	}
	l := New(txs)
	if l.Len() != len(txs) {
		t.Fatalf("ledger of %d transactions", l.Len())
	}
	seen := map[string]bool{}
	for i := range l.Len() {
		id := l.ID(i)
		if string(l.AppendID(nil, i)) != id {
			t.Errorf("AppendID %q, ID %q", l.AppendID(nil, i), id)
		}
		var want *flexv1.RewardTransaction
		for j := range txs {
			if txs[j].ID == id {
				want = &txs[j]
			}
		}
		if want == nil {
			t.Fatalf("transaction %d has id %q, of none stored", i, id)
		}
		seen[id] = true
		tx := l.At(i)
		if tx.CreditPence() != want.CreditPence || tx.Type() != want.Type || tx.PaymentStatus() != want.PaymentStatus {
			t.Errorf("%s: credit %d type %q payment %q", id, tx.CreditPence(), tx.Type(), tx.PaymentStatus())
		}
		if got := l.SettlementDate(i); got != want.SettlementDate || string(l.AppendSettlementDate(nil, i)) != got {
			t.Errorf("%s: settlement date %q, want %q", id, got, want.SettlementDate)
		}
		checkTime := func(name string, got time.Time, ok bool, want *metav1.Time) {
			if ok != (want != nil) || ok && !got.Equal(want.Truncate(time.Second)) {
				t.Errorf("%s: %s %v (%v), want %v", id, name, got, ok, want)
			}
		}
		start, ok := tx.StartTime()
		checkTime("start", start, ok, want.StartTime)
		end, ok := tx.EndTime()
		checkTime("end", end, ok, want.EndTime)
		flex, ok := tx.FlexWh()
		if ok != (want.FlexWh != nil) || ok && flex != *want.FlexWh {
			t.Errorf("%s: flexWh %d (%v), want %v", id, flex, ok, want.FlexWh)
		}
	}
	if len(seen) != len(txs) {
		t.Errorf("ids seen: %v", seen)
	}
}

// Statement order: newest first (start time, else settlement date), ties by id.
func TestNewOrdersNewestFirst(t *testing.T) {
	l := New([]flexv1.RewardTransaction{
		{ID: "00000000-0000-0000-0000-000000000002", StartTime: at("2025-01-01T00:00:00Z")},
		{ID: "00000000-0000-0000-0000-000000000004"},
		{ID: "00000000-0000-0000-0000-000000000001", StartTime: at("2025-01-01T00:00:00Z")},
		{ID: "00000000-0000-0000-0000-000000000003", SettlementDate: "2025-03-01"},
		{ID: "00000000-0000-0000-0000-000000000005", StartTime: at("2024-06-01T00:00:00Z")},
	})
	want := []string{"3", "1", "2", "5", "4"}
	for i, w := range want {
		if got := l.ID(i); got[len(got)-1:] != w {
			t.Errorf("position %d: %s, want …%s", i, got, w)
		}
	}
}

func TestParseUUIDRoundTrips(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"3f1c2b6e-8a0d-4c47-9e1b-2d5f7a9c0e13", true},
		{"00000000-0000-0000-0000-000000000000", true},
		{"3F1C2B6E-8A0D-4C47-9E1B-2D5F7A9C0E13", false},
		{"3f1c2b6e8a0d4c479e1b2d5f7a9c0e13", false},
		{"3f1c2b6e-8a0d-4c47-9e1b-2d5f7a9c0e1g", false},
		{"", false},
	} {
		id, ok := parseUUID(c.in)
		if ok != c.ok || ok && formatUUID(id) != c.in {
			t.Errorf("parseUUID(%q) = %v, %v", c.in, formatUUID(id), ok)
		}
	}
}

// A stored transaction is a fixed 48 bytes, without pointers.
func TestTransactionSize(t *testing.T) {
	if got := unsafe.Sizeof(packed{}); got > 48 {
		t.Errorf("a stored transaction is %d bytes", got)
	}
}

const secondsPerDay = 24 * 60 * 60

// TestTimeIsTheHouseholdsTransactionTime: the compact ledger says when a transaction
// happened exactly as the household core does, whatever the transaction carries.
func TestTimeIsTheHouseholdsTransactionTime(t *testing.T) {
	txs := []flexv1.RewardTransaction{
		{ID: "00000000-0000-0000-0000-000000000001", StartTime: at("2025-03-01T10:00:00Z"), SettlementDate: "2025-03-09"},
		{ID: "00000000-0000-0000-0000-000000000002", SettlementDate: "2025-02-01"},
		{ID: "00000000-0000-0000-0000-000000000003"},
		{ID: "not-a-uuid", SettlementDate: "2025-01-05"},
	}
	l := New(txs)
	for i := range l.Len() {
		var want time.Time
		for _, tx := range txs {
			if tx.ID == l.ID(i) {
				want = household.TransactionTime(tx)
			}
		}
		if got := l.Time(i); !got.Equal(want) {
			t.Errorf("transaction %s: time %v, want %v", l.ID(i), got, want)
		}
	}
}

// Append packs a row as the database reads it exactly as New packs the same transaction: the
// transactions page is packed from rows, the rewards page's statement from RewardTransactions.
func TestAppendPacksAsNew(t *testing.T) {
	day := func(s string) int32 {
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			panic(err)
		}
		return int32(d.Unix() / secondsPerDay)
	}
	cases := []struct {
		tx  flexv1.RewardTransaction
		row Row
	}{
		{flexv1.RewardTransaction{ID: "3f1c2b6e-8a0d-4c47-9e1b-2d5f7a9c0e13", Type: "flex period", CreditPence: 120,
			StartTime: at("2025-01-06T00:00:00Z"), EndTime: at("2025-01-13T00:00:00Z"), SettlementDate: "2025-01-18", FlexWh: wh(1500)},
			Row{ID: [16]byte{0x3f, 0x1c, 0x2b, 0x6e, 0x8a, 0x0d, 0x4c, 0x47, 0x9e, 0x1b, 0x2d, 0x5f, 0x7a, 0x9c, 0x0e, 0x13},
				Type: "flex period", CreditPence: 120, Start: at("2025-01-06T00:00:00Z").Unix(), HasStart: true,
				End: at("2025-01-13T00:00:00Z").Unix(), HasEnd: true, SettlementDay: day("2025-01-18"), HasSettlement: true,
				FlexWh: 1500, HasFlex: true}},
		{flexv1.RewardTransaction{ID: "ffffffff-ffff-ffff-ffff-ffffffffffff", Type: "withdrawal", CreditPence: -500,
			PaymentStatus: "posted", StartTime: at("2025-02-01T10:30:00.5+05:30")},
			Row{ID: [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
				Type: "withdrawal", PaymentStatus: "posted", CreditPence: -500, Start: at("2025-02-01T10:30:00.5+05:30").Unix(),
				HasStart: true}},
		// Beyond the packed ranges: times before 1970 and after 2106, dates before 1970 and after 2149.
		{flexv1.RewardTransaction{ID: "00000000-0000-0000-0000-00000000000a", StartTime: at("1969-07-20T20:17:40Z"),
			EndTime: at("2107-01-01T00:00:00Z"), SettlementDate: "2150-01-01", FlexWh: wh(-1 << 40)},
			Row{ID: [16]byte{15: 0x0a}, Start: at("1969-07-20T20:17:40Z").Unix(), HasStart: true,
				End: at("2107-01-01T00:00:00Z").Unix(), HasEnd: true, SettlementDay: day("2150-01-01"), HasSettlement: true,
				FlexWh: -1 << 40, HasFlex: true}},
		{flexv1.RewardTransaction{ID: "00000000-0000-0000-0000-00000000000b", SettlementDate: "1969-12-31", CreditPence: 1},
			Row{ID: [16]byte{15: 0x0b}, SettlementDay: day("1969-12-31"), HasSettlement: true, CreditPence: 1}},
		{flexv1.RewardTransaction{ID: "00000000-0000-0000-0000-00000000000c", StartTime: at("1970-01-01T00:00:00Z"),
			SettlementDate: "2149-06-04"},
			Row{ID: [16]byte{15: 0x0c}, HasStart: true, SettlementDay: day("2149-06-04"), HasSettlement: true}},
	}
	for _, c := range cases {
		want := New([]flexv1.RewardTransaction{c.tx})
		got := &Ledger{}
		got.Append(&c.row)
		if got.Len() != 1 || got.At(0) != want.At(0) || got.ID(0) != want.ID(0) || got.SettlementDate(0) != want.SettlementDate(0) ||
			got.Canonical(0) != want.Canonical(0) || !got.Time(0).Equal(want.Time(0)) {
			t.Errorf("%s: appended %+v %q %q, New's %+v %q %q", c.tx.ID, got.At(0), got.ID(0), got.SettlementDate(0),
				want.At(0), want.ID(0), want.SettlementDate(0))
		}
	}
}

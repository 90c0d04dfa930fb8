package rewardstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// transactionOf is a PageRow as the RewardTransaction Page answers for it.
func transactionOf(r *rewardstore.PageRow) flexv1.RewardTransaction {
	tx := flexv1.RewardTransaction{ID: uuid.UUID(r.ID).String(), Type: r.Type, CreditPence: r.CreditPence,
		PaymentStatus: r.PaymentStatus}
	if r.HasFlex {
		tx.FlexWh = ptr.To(r.FlexWh)
	}
	if r.HasStart {
		tx.StartTime = &metav1.Time{Time: time.Unix(r.Start, 0).UTC()}
	}
	if r.HasEnd {
		tx.EndTime = &metav1.Time{Time: time.Unix(r.End, 0).UTC()}
	}
	if r.HasSettlement {
		tx.SettlementDate = time.Unix(int64(r.SettlementDay)*24*60*60, 0).UTC().Format(time.DateOnly)
	}
	return tx
}

// pageWithBalance is PageWithBalance's page as RewardTransactions, and its balance.
func pageWithBalance(t *testing.T, site rewardstore.Site, p rewardstore.Page) ([]flexv1.RewardTransaction, household.Balance) {
	t.Helper()
	var got []flexv1.RewardTransaction
	b, err := store.PageWithBalance(context.Background(), site, p, func(r *rewardstore.PageRow) {
		got = append(got, transactionOf(r))
	})
	if err != nil {
		t.Fatal(err)
	}
	return got, b
}

// samePageAndBalance holds PageWithBalance to Page and Balance, the two statements it
// replaces on the transactions page: the same transactions in the same order, field for
// field, and the same balance.
func samePageAndBalance(t *testing.T, site rewardstore.Site, p rewardstore.Page) []flexv1.RewardTransaction {
	t.Helper()
	ctx := context.Background()
	wantPage, err := store.Page(ctx, site, p)
	if err != nil {
		t.Fatal(err)
	}
	wantBalance, err := store.Balance(ctx, site)
	if err != nil {
		t.Fatal(err)
	}
	got, b := pageWithBalance(t, site, p)
	if fmt.Sprintf("%+v", describe(got)) != fmt.Sprintf("%+v", describe(wantPage)) {
		t.Errorf("page %+v:\n got %v\nwant %v", p, describe(got), describe(wantPage))
	}
	if b.Current != wantBalance.Current || b.Earnings != wantBalance.Earnings ||
		(b.FirstReward == nil) != (wantBalance.FirstReward == nil) ||
		b.FirstReward != nil && !b.FirstReward.Equal(*wantBalance.FirstReward) {
		t.Errorf("page %+v: balance %+v, want Balance's %+v", p, b, wantBalance)
	}
	return got
}

// describe is a transaction's every field as text, to compare pages.
func describe(txs []flexv1.RewardTransaction) []string {
	out := make([]string, 0, len(txs))
	for _, tx := range txs {
		s := fmt.Sprintf("%s %s %d %q %q", tx.ID, tx.Type, tx.CreditPence, tx.SettlementDate, tx.PaymentStatus)
		if tx.FlexWh != nil {
			s += fmt.Sprintf(" flex=%d", *tx.FlexWh)
		}
		if tx.StartTime != nil {
			s += " start=" + tx.StartTime.UTC().Format(time.RFC3339Nano)
		}
		if tx.EndTime != nil {
			s += " end=" + tx.EndTime.UTC().Format(time.RFC3339Nano)
		}
		out = append(out, s)
	}
	return out
}

// One statement answers the page and the balance as Page and Balance do: on histories with
// credits, corrections, withdrawals in every payment status (their statuses changed after
// they were written, too), an empty history, paging past the end, and since and until.
func TestPageWithBalanceIsPageAndBalance(t *testing.T) {
	ctx := context.Background()
	day := func(n int) time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, n) }
	at := func(n int) *metav1.Time { return &metav1.Time{Time: day(n)} }

	t.Run("empty history", func(t *testing.T) {
		site := newSite()
		got := samePageAndBalance(t, site, rewardstore.Page{Limit: 10})
		if len(got) != 0 {
			t.Errorf("an empty history's page: %v", describe(got))
		}
		_, b := pageWithBalance(t, site, rewardstore.Page{Limit: 10})
		if b != (household.Balance{}) {
			t.Errorf("an empty history's balance %+v", b)
		}
	})

	site := newSite()
	weekly := make([]flexv1.RewardTransaction, 0, 40) // a year of weekly rewards beside the others
	for i := range 40 {
		weekly = append(weekly, flexv1.RewardTransaction{ID: uuid.NewString(), Type: "flex event", CreditPence: int64(10 + i),
			StartTime: at(60 + 7*i), EndTime: at(60 + 7*i), SettlementDate: day(90 + 7*i).Format(time.DateOnly),
			FlexWh: ptr.To(int64(100 * i))})
	}
	txs := slices.Concat([]flexv1.RewardTransaction{
		{ID: uuid.NewString(), Type: "flex event", CreditPence: 100, StartTime: at(31), EndTime: &metav1.Time{Time: day(31).Add(time.Hour)},
			FlexWh: ptr.To[int64](1500)},
		{ID: uuid.NewString(), Type: "signup bonus", CreditPence: 300, SettlementDate: day(9).Format(time.DateOnly)},
		{ID: uuid.NewString(), Type: "correction", CreditPence: -5, StartTime: at(20)},
		{ID: uuid.NewString(), Type: household.TransactionWithdrawal, CreditPence: -120, StartTime: at(40), PaymentStatus: "posted"},
		{ID: uuid.NewString(), Type: household.TransactionWithdrawal, CreditPence: -100, StartTime: at(41), PaymentStatus: "failed"},
		{ID: uuid.NewString(), Type: household.TransactionWithdrawal, CreditPence: -10, StartTime: at(42), PaymentStatus: "returned"},
		{ID: uuid.NewString(), Type: household.TransactionWithdrawal, CreditPence: -20, StartTime: at(43), PaymentStatus: "rejected"},
		{ID: uuid.NewString(), Type: household.TransactionWithdrawal, CreditPence: -30, StartTime: at(44), PaymentStatus: "cancelled"},
		{ID: uuid.NewString(), Type: household.TransactionWithdrawal, CreditPence: -40, StartTime: at(45), PaymentStatus: "pending_approval"},
		// Two at the same time: ties are broken by id.
		{ID: uuid.NewString(), Type: "flex event", CreditPence: 70, StartTime: at(50)},
		{ID: uuid.NewString(), Type: "flex event", CreditPence: 80, StartTime: at(50)},
	}, weekly)
	if err := store.AppendMany(ctx, site, txs, rewardstore.SourceLedgerSpec); err != nil {
		t.Fatal(err)
	}
	// A pending withdrawal approved, then processing, then failed: it paid nothing out, and the
	// page shows its current status.
	pending := txs[8].ID
	for _, to := range []flexv1.PaymentStatus{"approved", "processing", "failed"} {
		if _, err := store.SetPaymentStatus(ctx, site, pending, to, "tester"); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		page rewardstore.Page
		want int
	}{
		{"the whole history", rewardstore.Page{Limit: 100}, len(txs)},
		{"the newest page", rewardstore.Page{Limit: 10}, 10},
		{"a later page", rewardstore.Page{Limit: 10, Offset: 45}, len(txs) - 45},
		{"past the end", rewardstore.Page{Limit: 10, Offset: 100}, 0},
		{"since inclusive", rewardstore.Page{Limit: 100, Since: day(41)}, 40 + 7},
		{"until exclusive", rewardstore.Page{Limit: 100, Until: day(41)}, 4},
		{"both", rewardstore.Page{Limit: 3, Offset: 1, Since: day(20), Until: day(45)}, 3},
		{"nothing in range", rewardstore.Page{Limit: 10, Since: day(-100), Until: day(-50)}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := samePageAndBalance(t, site, c.page); len(got) != c.want {
				t.Errorf("%d transactions, want %d", len(got), c.want)
			}
		})
	}
	_, b := pageWithBalance(t, site, rewardstore.Page{Limit: 1})
	// 100 + 300 - 5 - 120 + 70 + 80 + (10 + ... + 49): the withdrawals that paid nothing out
	// (failed, returned, rejected, cancelled, and the pending one once it failed) do not count.
	weeklySum := int64(40*10 + 39*40/2)
	if want := 100 + 300 - 5 - 120 + 70 + 80 + weeklySum; b.Current != want {
		t.Errorf("balance %d, want %d", b.Current, want)
	}
	if want := 100 + 300 + 70 + 80 + weeklySum; b.Earnings != want {
		t.Errorf("earnings %d, want %d", b.Earnings, want)
	}
	if b.FirstReward == nil || !b.FirstReward.Equal(day(9)) {
		t.Errorf("first reward %v, want %v", b.FirstReward, day(9))
	}
}

// The database taken away: PageWithBalance says Unavailable, as Page and Balance do.
func TestPageWithBalanceUnavailable(t *testing.T) {
	if !testDB.CanStop() {
		t.Skip("the test database's server is not this process's")
	}
	ctx := context.Background()
	site := newSite()
	if err := testDB.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err := store.PageWithBalance(ctx, site, rewardstore.Page{Limit: 10}, func(*rewardstore.PageRow) {})
	if !db.Unavailable(err) {
		t.Errorf("a page with the database stopped: %v", err)
	}
	if err := testDB.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

// A page costs the reader's process allocations per page, not per transaction: a cold read
// of a year of weekly rewards (52 rows) scans every row into the same values (the scan's
// destinations made once, the type and payment status matched to the few strings they take),
// so that the manager's collector does not pay for each row of every page read (issue 38:
// the transactions page read cold, against the same SQL run raw).
func TestPageWithBalanceAllocatesPerPageNotPerRow(t *testing.T) {
	ctx := context.Background()
	year, month := newSite(), newSite()
	start := time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC)
	history := func(site rewardstore.Site, weeks int) {
		txs := make([]flexv1.RewardTransaction, 0, weeks+1)
		for i := range weeks {
			txs = append(txs, flexv1.RewardTransaction{ID: uuid.NewString(), Type: "flex event", CreditPence: int64(10 + i),
				StartTime: &metav1.Time{Time: start.AddDate(0, 0, 7*i)}, EndTime: &metav1.Time{Time: start.AddDate(0, 0, 7*i+1)},
				SettlementDate: start.AddDate(0, 1, 7*i).Format(time.DateOnly), FlexWh: ptr.To(int64(100 * i))})
		}
		txs = append(txs, flexv1.RewardTransaction{ID: uuid.NewString(), Type: household.TransactionWithdrawal, CreditPence: -5,
			StartTime: &metav1.Time{Time: start.AddDate(0, 0, 7*weeks)}, PaymentStatus: "posted"})
		if err := store.AppendMany(ctx, site, txs, rewardstore.SourceAPI); err != nil {
			t.Fatal(err)
		}
	}
	history(year, 51)
	history(month, 3)
	allocs := func(site rewardstore.Site) float64 {
		return testing.AllocsPerRun(20, func() {
			if _, err := store.PageWithBalance(ctx, site, rewardstore.Page{Limit: 100}, func(*rewardstore.PageRow) {}); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(month), allocs(year)
	t.Logf("allocations of a page: %.0f for 52 transactions, %.0f for 4", large, small)
	if perRow := (large - small) / (52 - 4); perRow >= 1 {
		t.Errorf("a page of 52 transactions allocates %.0f times, of 4 %.0f: %.1f allocations a row, want fewer than one", large, small, perRow)
	}
}

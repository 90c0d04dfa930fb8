package rewardstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

var (
	testDB *dbtest.Database
	store  *rewardstore.Store
)

func TestMain(m *testing.M) {
	dbtest.Main(m, &testDB, func(d *dbtest.Database) { store = &rewardstore.Store{Pool: d.Pool} })
}

// newSite is a site of its own, so tests do not meet each other's rows.
func newSite() rewardstore.Site {
	return rewardstore.Site{Namespace: "org-" + uuid.NewString()[:8], ID: uuid.NewString()}
}

func credit(pence int64, at time.Time) flexv1.RewardTransaction {
	return flexv1.RewardTransaction{ID: uuid.NewString(), Type: "flex event", CreditPence: pence,
		StartTime: &metav1.Time{Time: at.UTC().Truncate(time.Second)}, FlexWh: ptr.To[int64](1200)}
}

func outboxCount(t *testing.T, site rewardstore.Site) int {
	t.Helper()
	var n int
	if err := testDB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE organisation = $1 AND site_id = $2`,
		site.Namespace, site.ID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestAppendIsIdempotentByID(t *testing.T) {
	ctx := context.Background()
	site := newSite()
	tx := credit(250, time.Now().Add(-time.Hour))
	stored, created, err := store.Append(ctx, site, tx, rewardstore.SourceAPI)
	if err != nil || !created || stored.ID != tx.ID {
		t.Fatalf("first append: %v, created %v", err, created)
	}
	// The same again: stored once, answered as stored, one event.
	stored, created, err = store.Append(ctx, site, tx, rewardstore.SourceAPI)
	if err != nil || created || stored.CreditPence != 250 || *stored.FlexWh != 1200 || !stored.StartTime.Equal(tx.StartTime) {
		t.Fatalf("same again: %+v, created %v, %v", stored, created, err)
	}
	if n := outboxCount(t, site); n != 1 {
		t.Errorf("%d outbox events, want 1", n)
	}
	// Another body under the same id: a conflict, nothing written.
	other := tx
	other.CreditPence = 999
	if _, _, err := store.Append(ctx, site, other, rewardstore.SourceAPI); !errors.Is(err, rewardstore.ErrConflict) {
		t.Errorf("same id, other body: %v, want ErrConflict", err)
	}
	// The same id at another site of the organisation: a conflict too (ids are the organisation's).
	if _, _, err := store.Append(ctx, rewardstore.Site{Namespace: site.Namespace, ID: uuid.NewString()}, tx,
		rewardstore.SourceAPI); !errors.Is(err, rewardstore.ErrConflict) {
		t.Errorf("same id at another site: %v, want ErrConflict", err)
	}
	all, err := store.All(ctx, site)
	if err != nil || len(all) != 1 || all[0].CreditPence != 250 {
		t.Errorf("history %+v, %v", all, err)
	}
}

func TestImportTellsNothing(t *testing.T) {
	ctx := context.Background()
	site := newSite()
	if _, _, err := store.Import(ctx, site, credit(100, time.Now()), rewardstore.SourceLedgerSpec); err != nil {
		t.Fatal(err)
	}
	if n := outboxCount(t, site); n != 0 {
		t.Errorf("%d outbox events for an imported credit, want 0", n)
	}
}

// TestOutboxHoldsEveryCredit: every credit's event stays in the outbox (delivered from there,
// internal/delivery); a debit has none.
func TestOutboxHoldsEveryCredit(t *testing.T) {
	ctx := context.Background()
	site := newSite()
	for i := range 20 {
		tx := credit(int64(100+i), time.Now().Add(time.Duration(i)*time.Minute))
		if _, _, err := store.Append(ctx, site, tx, rewardstore.SourceAPI); err != nil {
			t.Fatal(err)
		}
	}
	// A withdrawal (a debit) is not a credit: no event.
	w := flexv1.RewardTransaction{ID: uuid.NewString(), Type: household.TransactionWithdrawal, CreditPence: -50,
		StartTime: &metav1.Time{Time: time.Now().UTC().Truncate(time.Second)}, PaymentStatus: household.PaymentPendingApproval}
	if _, _, err := store.Append(ctx, site, w, rewardstore.SourceAPI); err != nil {
		t.Fatal(err)
	}
	if n := outboxCount(t, site); n != 20 {
		t.Errorf("%d outbox events for 20 credits, want 20", n)
	}
}

// Withdrawals at once never take the balance below zero: the site's row is locked from
// reading the history to the commit, so one withdraws the balance and the others find none.
// The revision counts every change the history has had, once: appends (one each, the same
// again none), withdrawals and payment status changes; concurrent writers each count.
func TestRevisionCountsEveryChangeOnce(t *testing.T) {
	ctx := context.Background()
	site := newSite()
	revision := func() int64 {
		t.Helper()
		rev, err := store.Revision(ctx, site)
		if err != nil {
			t.Fatal(err)
		}
		return rev
	}
	if rev := revision(); rev != 0 {
		t.Fatalf("a site without history: revision %d, want 0", rev)
	}
	tx := credit(5000, time.Now().Add(-60*24*time.Hour))
	for range 2 {
		if _, _, err := store.Append(ctx, site, tx, rewardstore.SourceAPI); err != nil {
			t.Fatal(err)
		}
	}
	if rev := revision(); rev != 1 {
		t.Errorf("after one credit sent twice: revision %d, want 1", rev)
	}
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if _, _, err := store.Append(ctx, site, credit(10, time.Now().Add(-time.Hour)), rewardstore.SourceAPI); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	policy := household.RewardPolicy{MinimumWithdrawalPence: 1000, WithdrawalMinWaitDays: 30}
	w, err := store.Withdraw(ctx, site, func(b household.Balance) (flexv1.RewardTransaction, error) {
		return policy.Withdrawal(b, time.Now(), uuid.NewString())
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []flexv1.PaymentStatus{"approved", "approved", "processing"} {
		var refused *household.PaymentChangeRefused
		if _, err := store.SetPaymentStatus(ctx, site, w.ID, to, "test"); err != nil && !errors.As(err, &refused) {
			t.Fatal(err)
		}
	}
	if rev := revision(); rev != 1+6+1+2 {
		t.Errorf("revision %d, want 10: 7 credits, a withdrawal, 2 status changes (the repeated one is refused)", rev)
	}
}

func TestConcurrentWithdrawals(t *testing.T) {
	ctx := context.Background()
	site := newSite()
	if _, _, err := store.Append(ctx, site, credit(5000, time.Now().Add(-60*24*time.Hour)), rewardstore.SourceAPI); err != nil {
		t.Fatal(err)
	}
	policy := household.RewardPolicy{MinimumWithdrawalPence: 1000, WithdrawalMinWaitDays: 30}
	const attempts = 8
	var wg sync.WaitGroup
	errs := make([]error, attempts)
	for i := range attempts {
		wg.Go(func() {
			_, errs[i] = store.Withdraw(ctx, site, func(b household.Balance) (flexv1.RewardTransaction, error) {
				return policy.Withdrawal(b, time.Now(), uuid.NewString())
			})
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, household.ErrCannotWithdraw):
			t.Errorf("withdrawal: %v", err)
		}
	}
	b, err := store.Balance(ctx, site)
	if err != nil {
		t.Fatal(err)
	}
	if ok != 1 || b.Current != 0 {
		t.Errorf("%d withdrawals succeeded, balance %d; want 1 and 0", ok, b.Current)
	}
}

func TestPaymentStatusChanges(t *testing.T) {
	ctx := context.Background()
	site := newSite()
	if _, _, err := store.Append(ctx, site, credit(2000, time.Now().Add(-40*24*time.Hour)), rewardstore.SourceAPI); err != nil {
		t.Fatal(err)
	}
	policy := household.RewardPolicy{MinimumWithdrawalPence: 1000, WithdrawalMinWaitDays: 30}
	w, err := store.Withdraw(ctx, site, func(b household.Balance) (flexv1.RewardTransaction, error) {
		return policy.Withdrawal(b, time.Now(), uuid.NewString())
	})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := store.Balance(ctx, site); b.Current != 0 {
		t.Fatalf("balance after withdrawing %d", b.Current)
	}
	// Only the state machine's steps are recorded; the others are refused and change nothing
	// (failed -> processing was the double payment: the money back, then paid out again).
	for _, step := range []struct {
		to      flexv1.PaymentStatus
		refused bool
		balance int64
	}{{"approved", false, 0}, {"failed", true, 0}, {"approved", true, 0}, {"processing", false, 0}, {"failed", false, 2000},
		{"failed", true, 2000}, {"processing", true, 2000}, {"posted", true, 2000}} {
		got, err := store.SetPaymentStatus(ctx, site, w.ID, step.to, "tester")
		var refused *household.PaymentChangeRefused
		switch {
		case step.refused && !errors.As(err, &refused):
			t.Fatalf("to %s: %+v, %v, want refused", step.to, got, err)
		case !step.refused && (err != nil || got.PaymentStatus != step.to):
			t.Fatalf("to %s: %+v, %v", step.to, got, err)
		}
		b, err := store.Balance(ctx, site)
		if err != nil || b.Current != step.balance {
			t.Errorf("after %s: balance %d, want %d (%v)", step.to, b.Current, step.balance, err)
		}
	}
	changes, err := store.StatusChanges(ctx, site, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := []flexv1.PaymentStatus{"approved", "processing", "failed"}
	if len(changes) != len(want) {
		t.Fatalf("changes %+v, want %v", changes, want)
	}
	for i, c := range changes {
		if c.To != want[i] || c.Actor != "tester" || c.At.IsZero() {
			t.Errorf("change %d: %+v", i, c)
		}
	}
	if changes[0].From != household.PaymentPendingApproval {
		t.Errorf("first change from %q", changes[0].From)
	}
	// A credit has no payment status.
	all, _ := store.All(ctx, site)
	for _, tx := range all {
		if tx.Type != household.TransactionWithdrawal {
			if _, err := store.SetPaymentStatus(ctx, site, tx.ID, "approved", "tester"); !errors.Is(err, rewardstore.ErrNotWithdrawal) {
				t.Errorf("a credit's payment status: %v", err)
			}
		}
	}
}

// The balance is summed in SQL alone: what counts (a withdrawal that paid nothing out does
// not), what earns (positive transactions that are not withdrawals) and when the wait starts
// (the earliest of those, by start time, else settlement date). The expected figures are
// worked out by hand.
func TestBalance(t *testing.T) {
	day := func(n int) time.Time { return time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, n) }
	at := func(n int) *metav1.Time { return &metav1.Time{Time: day(n)} }
	id := func() string { return uuid.NewString() }
	cases := []struct {
		name              string
		txs               []flexv1.RewardTransaction
		current, earnings int64
		first             *time.Time
	}{
		{name: "no history"},
		{name: "rewards and a posted withdrawal", txs: []flexv1.RewardTransaction{
			{ID: id(), Type: "flex event", CreditPence: 100, StartTime: at(31)},
			{ID: id(), Type: "flex event", CreditPence: 50, SettlementDate: day(14).Format(time.DateOnly)},
			{ID: id(), Type: household.TransactionWithdrawal, CreditPence: -120, StartTime: at(-365), PaymentStatus: "posted"},
		}, current: 30, earnings: 150, first: ptr.To(day(14))},
		{name: "withdrawals that paid nothing out do not count", txs: []flexv1.RewardTransaction{
			{ID: id(), Type: "flex event", CreditPence: 100, StartTime: at(31)},
			{ID: id(), Type: household.TransactionWithdrawal, CreditPence: -100, StartTime: at(40), PaymentStatus: "failed"},
			{ID: id(), Type: household.TransactionWithdrawal, CreditPence: -10, StartTime: at(41), PaymentStatus: "returned"},
			{ID: id(), Type: household.TransactionWithdrawal, CreditPence: -20, StartTime: at(42), PaymentStatus: "rejected"},
			{ID: id(), Type: household.TransactionWithdrawal, CreditPence: -30, StartTime: at(43), PaymentStatus: "cancelled"},
			{ID: id(), Type: household.TransactionWithdrawal, CreditPence: -40, StartTime: at(44), PaymentStatus: "pending_approval"},
		}, current: 60, earnings: 100, first: ptr.To(day(31))},
		{name: "a correction debits without earning", txs: []flexv1.RewardTransaction{
			{ID: id(), Type: "correction", CreditPence: -5, StartTime: at(-1000)},
		}, current: -5},
		{name: "a sign-up bonus by settlement date starts the wait", txs: []flexv1.RewardTransaction{
			{ID: id(), Type: "flex event", CreditPence: 500, StartTime: at(10)},
			{ID: id(), Type: "signup bonus", CreditPence: 300, SettlementDate: day(9).Format(time.DateOnly)},
		}, current: 800, earnings: 800, first: ptr.To(day(9))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			site := newSite()
			if err := store.AppendMany(ctx, site, c.txs, rewardstore.SourceLedgerSpec); err != nil {
				t.Fatal(err)
			}
			b, err := store.Balance(ctx, site)
			if err != nil {
				t.Fatal(err)
			}
			if b.Current != c.current || b.Earnings != c.earnings {
				t.Errorf("balance %d, earnings %d; want %d, %d", b.Current, b.Earnings, c.current, c.earnings)
			}
			switch {
			case c.first == nil && b.FirstReward != nil:
				t.Errorf("first reward %v, want none", *b.FirstReward)
			case c.first != nil && (b.FirstReward == nil || !b.FirstReward.Equal(*c.first)):
				t.Errorf("first reward %v, want %v", b.FirstReward, *c.first)
			}
		})
	}
}

// Summary reads every figure of a ledger's status from one snapshot: the balance is
// Balance's, the recent transactions Page's, the count and the last credit the history's.
func TestSummary(t *testing.T) {
	ctx := context.Background()
	site := newSite()
	empty, err := store.Summary(ctx, site, 2)
	if err != nil || empty.Revision != 0 || empty.Count != 0 || empty.LastCredited != nil || len(empty.Recent) != 0 ||
		empty.Balance.Current != 0 {
		t.Fatalf("summary of no history: %+v, %v", empty, err)
	}
	base := time.Now().Add(-40 * 24 * time.Hour).UTC().Truncate(time.Second)
	older, newer := credit(1500, base), credit(700, base.Add(24*time.Hour))
	for _, tx := range []flexv1.RewardTransaction{older, newer} {
		if _, _, err := store.Append(ctx, site, tx, rewardstore.SourceAPI); err != nil {
			t.Fatal(err)
		}
	}
	policy := household.RewardPolicy{MinimumWithdrawalPence: 1000, WithdrawalMinWaitDays: 30}
	w, err := store.Withdraw(ctx, site, func(b household.Balance) (flexv1.RewardTransaction, error) {
		return policy.Withdrawal(b, time.Now(), uuid.NewString())
	})
	if err != nil || w.CreditPence != -2200 {
		t.Fatalf("withdrawal %+v, %v", w, err)
	}
	got, err := store.Summary(ctx, site, 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.Balance(ctx, site)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := store.Revision(ctx, site)
	if err != nil {
		t.Fatal(err)
	}
	if got.Balance.Current != b.Current || got.Balance.Earnings != 2200 || got.Balance.Current != 0 ||
		!got.Balance.FirstReward.Equal(base) {
		t.Errorf("summary balance %+v, Balance %+v", got.Balance, b)
	}
	if got.Revision != rev || got.Count != 3 || got.LastCredited == nil || !got.LastCredited.Equal(newer.StartTime.Time) {
		t.Errorf("summary revision %d (want %d), count %d, last credited %v", got.Revision, rev, got.Count, got.LastCredited)
	}
	if len(got.Recent) != 2 || got.Recent[0].ID != w.ID || got.Recent[1].ID != newer.ID {
		t.Errorf("recent %+v, want the withdrawal then the newer credit", got.Recent)
	}
}

func TestPageNewestFirstWithinRange(t *testing.T) {
	ctx := context.Background()
	site := newSite()
	base := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ids := make([]string, 0, 5)
	for day := range 5 {
		tx := credit(100, base.Add(time.Duration(day)*24*time.Hour))
		ids = append(ids, tx.ID)
		if _, _, err := store.Append(ctx, site, tx, rewardstore.SourceAPI); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		page rewardstore.Page
		want []string
	}{
		{"all", rewardstore.Page{Limit: 10}, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}},
		{"limit and offset", rewardstore.Page{Limit: 2, Offset: 1}, []string{ids[3], ids[2]}},
		{"since inclusive", rewardstore.Page{Limit: 10, Since: base.Add(3 * 24 * time.Hour)}, []string{ids[4], ids[3]}},
		{"until exclusive", rewardstore.Page{Limit: 10, Until: base.Add(2 * 24 * time.Hour)}, []string{ids[1], ids[0]}},
		{"both", rewardstore.Page{Limit: 10, Since: base.Add(24 * time.Hour), Until: base.Add(3 * 24 * time.Hour)}, []string{ids[2], ids[1]}},
		{"past the end", rewardstore.Page{Limit: 10, Offset: 5}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := store.Page(ctx, site, c.page)
			if err != nil {
				t.Fatal(err)
			}
			gotIDs := make([]string, 0, len(got))
			for _, tx := range got {
				gotIDs = append(gotIDs, tx.ID)
			}
			if fmt.Sprint(gotIDs) != fmt.Sprint(c.want) {
				t.Errorf("got %v, want %v", gotIDs, c.want)
			}
		})
	}
}

// The database taken away: every call says Unavailable and nothing is half-written; back,
// the same store works again.
func TestUnavailable(t *testing.T) {
	if !testDB.CanStop() {
		t.Skip("the test database's server is not this process's")
	}
	ctx := context.Background()
	site := newSite()
	if err := testDB.Stop(); err != nil {
		t.Fatal(err)
	}
	tx := credit(100, time.Now())
	_, _, err := store.Append(ctx, site, tx, rewardstore.SourceAPI)
	if !db.Unavailable(err) {
		t.Errorf("append with the database stopped: %v", err)
	}
	if _, err := store.Balance(ctx, site); !db.Unavailable(err) {
		t.Errorf("balance with the database stopped: %v", err)
	}
	if err := testDB.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// The first call after it is back works: the connections that died with the server were
	// forgotten when the outage was seen.
	if _, _, err := store.Append(ctx, site, tx, rewardstore.SourceAPI); err != nil {
		t.Fatalf("after the database came back: %v", err)
	}
	if all, err := store.All(ctx, site); err != nil || len(all) != 1 {
		t.Errorf("history %v, %v", all, err)
	}
}

func TestAppendManyIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	site := newSite()
	first := credit(10, time.Now())
	if err := store.AppendMany(ctx, site, []flexv1.RewardTransaction{first, credit(20, time.Now())}, rewardstore.SourceAPI); err != nil {
		t.Fatal(err)
	}
	clash := first
	clash.CreditPence = 11
	err := store.AppendMany(ctx, site, []flexv1.RewardTransaction{credit(30, time.Now()), clash}, rewardstore.SourceAPI)
	if !errors.Is(err, rewardstore.ErrConflict) {
		t.Fatalf("a batch with a conflicting id: %v", err)
	}
	if all, err := store.All(ctx, site); err != nil || len(all) != 2 {
		t.Errorf("history %d transactions (%v), want the first batch's 2", len(all), err)
	}
}

// Two changes of one withdrawal at once are judged one after the other (the site's row lock):
// from processing, posted and failed cannot both pass, whatever the interleaving.
func TestConcurrentPaymentStatusChanges(t *testing.T) {
	ctx := context.Background()
	for range 5 {
		site := newSite()
		w := flexv1.RewardTransaction{ID: uuid.NewString(), Type: household.TransactionWithdrawal, CreditPence: -500,
			StartTime: &metav1.Time{Time: time.Now().UTC().Truncate(time.Second)}, PaymentStatus: household.PaymentPendingApproval}
		if err := store.AppendMany(ctx, site, []flexv1.RewardTransaction{credit(500, time.Now().Add(-time.Hour)), w},
			rewardstore.SourceAPI); err != nil {
			t.Fatal(err)
		}
		for _, step := range []flexv1.PaymentStatus{"approved", "processing"} {
			if _, err := store.SetPaymentStatus(ctx, site, w.ID, step, "tester"); err != nil {
				t.Fatal(err)
			}
		}
		tos := []flexv1.PaymentStatus{"posted", "failed", "posted", "failed"}
		errs := make([]error, len(tos))
		var wg sync.WaitGroup
		for i, to := range tos {
			wg.Go(func() { _, errs[i] = store.SetPaymentStatus(ctx, site, w.ID, to, "tester") })
		}
		wg.Wait()
		passed := 0
		for i, err := range errs {
			var refused *household.PaymentChangeRefused
			switch {
			case err == nil:
				passed++
			case !errors.As(err, &refused):
				t.Fatalf("to %s: %v", tos[i], err)
			}
		}
		changes, err := store.StatusChanges(ctx, site, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if passed != 1 || len(changes) != 3 {
			t.Fatalf("%d changes passed, %d recorded (%+v), want 1 and 3", passed, len(changes), changes)
		}
	}
}

// A transaction id is unique within its organisation only: another organisation's use of an id
// is neither a conflict nor an idempotent answer (no existence oracle), and each organisation's
// credit is its own transaction with its own event.
func TestTransactionIDsArePerOrganisation(t *testing.T) {
	ctx := context.Background()
	a, b := newSite(), newSite()
	tx := credit(250, time.Now().Add(-time.Hour))
	if _, created, err := store.Append(ctx, a, tx, rewardstore.SourceAPI); err != nil || !created {
		t.Fatalf("organisation A: created %v, %v", created, err)
	}
	other := tx
	other.CreditPence = 999
	stored, created, err := store.Append(ctx, b, other, rewardstore.SourceAPI)
	if err != nil || !created || stored.CreditPence != 999 {
		t.Fatalf("organisation B, the same id with another record: %+v, created %v, %v; want its own transaction", stored, created, err)
	}
	if _, created, err := store.Append(ctx, b, other, rewardstore.SourceAPI); err != nil || created {
		t.Errorf("organisation B again: created %v, %v; want the idempotent answer", created, err)
	}
	if _, _, err := store.Append(ctx, b, tx, rewardstore.SourceAPI); !errors.Is(err, rewardstore.ErrConflict) {
		t.Errorf("organisation B, its id with A's record: %v, want ErrConflict (B's own record differs)", err)
	}
	for _, site := range []rewardstore.Site{a, b} {
		if n := outboxCount(t, site); n != 1 {
			t.Errorf("%s: %d outbox events, want 1: its own credit's", site.Namespace, n)
		}
	}
	idA, _, _ := rewardstore.CreditEvent(a, tx)
	idB, _, _ := rewardstore.CreditEvent(b, other)
	if idA == idB {
		t.Errorf("both organisations' credits have event id %s", idA)
	}
}

// Two credits near MaxInt64 once made sum(credit_pence)::bigint overflow: every balance and
// page read of the site failed, and the append-only history could not be cleaned up. A credit
// beyond household.MaxTransactionPence is refused (the store, and the database's constraint);
// rows stored before the bound (written here with the constraint lifted for the moment) still
// leave the balance and the pages readable, the sums held at the bound.
func TestBalanceStaysReadable(t *testing.T) {
	ctx := context.Background()
	site := newSite()
	for _, pence := range []int64{household.MaxTransactionPence + 1, -household.MaxTransactionPence - 1, math.MaxInt64 - 1} {
		if _, _, err := store.Append(ctx, site, credit(pence, time.Now()), rewardstore.SourceAPI); err == nil {
			t.Errorf("a credit of %d p was stored", pence)
		}
	}
	if _, _, err := store.Append(ctx, site, credit(household.MaxTransactionPence, time.Now()), rewardstore.SourceAPI); err != nil {
		t.Errorf("a credit at the bound: %v", err)
	}
	_, err := testDB.Pool.Exec(ctx, `INSERT INTO reward_transactions (organisation, site_id, transaction_id, transaction_type,
		credit_pence, occurred_at, source, request_digest) VALUES ($1, $2, $3, 'correction', $4, now(), 'api', '\x00')`,
		site.Namespace, site.ID, uuid.NewString(), int64(math.MaxInt64-1))
	if err == nil {
		t.Fatal("the database stored a credit beyond the bound")
	}

	tx, err := testDB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	for _, q := range []string{`ALTER TABLE reward_transactions DROP CONSTRAINT reward_transactions_credit_bounded`,
		`INSERT INTO reward_transactions (organisation, site_id, transaction_id, transaction_type, credit_pence, occurred_at,
			source, request_digest) SELECT $1, $2, gen_random_uuid(), 'correction', $3, now(), 'api', '\x00' FROM generate_series(1, 2)`,
		`ALTER TABLE reward_transactions ADD CONSTRAINT reward_transactions_credit_bounded
			CHECK (credit_pence BETWEEN -1000000000000 AND 1000000000000) NOT VALID`} {
		args := []any{}
		if len(q) > 0 && q[0] == 'I' {
			args = []any{site.Namespace, site.ID, int64(math.MaxInt64 - 1)}
		}
		if _, err := tx.Exec(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	b, err := store.Balance(ctx, site)
	if err != nil {
		t.Fatalf("the balance of a site with credits near MaxInt64: %v", err)
	}
	if b.Current != math.MaxInt64 || b.Earnings != math.MaxInt64 {
		t.Errorf("balance %+v, want both held at MaxInt64", b)
	}
	page, err := store.Page(ctx, site, rewardstore.Page{Limit: 10})
	if err != nil || len(page) != 3 {
		t.Errorf("the site's page: %d transactions, %v", len(page), err)
	}
}

func TestSitesWithHistoryListsEveryCreditedSite(t *testing.T) {
	ctx := context.Background()
	credited, untouched := newSite(), newSite()
	if _, _, err := store.Append(ctx, credited, credit(10, time.Now().Add(-time.Hour)), rewardstore.SourceAPI); err != nil {
		t.Fatal(err)
	}
	sites, err := store.SitesWithHistory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(sites, credited) || slices.Contains(sites, untouched) {
		t.Fatalf("SitesWithHistory holds the credited site: %v, the untouched one: %v (want true, false)",
			slices.Contains(sites, credited), slices.Contains(sites, untouched))
	}
}

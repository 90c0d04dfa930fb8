package rewards

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/pagestore"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// unkept is a Service on the test database that keeps nothing (it does not listen): every
// read asks the database.
func unkept() *Service {
	return New(Config{Store: &rewardstore.Store{Pool: testDB.Pool}, Private: &pagestore.Store{Pool: testDB.Pool}})
}

// readAll reads q as the REST door writes it: the first page, then every batch Next reads;
// it answers the ids in order and the most transactions one batch held.
func readAll(t *testing.T, s *Service, key rewardstore.Site, q TransactionsQuery) (ids []string, widest int) {
	t.Helper()
	ctx := context.Background()
	p, err := s.transactionsOf(ctx, key, q)
	if err != nil {
		t.Fatal(err)
	}
	for {
		widest = max(widest, p.Ledger.Len())
		for i := p.From; i < p.To; i++ {
			ids = append(ids, p.Ledger.ID(i))
		}
		more, err := p.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			return ids, widest
		}
	}
}

// statement is the site's whole history in the statement's order, as the store's Page reads it.
func statement(t *testing.T, key rewardstore.Site, p rewardstore.Page) []string {
	t.Helper()
	p.Limit = 100000
	txs, err := (&rewardstore.Store{Pool: testDB.Pool}).Page(context.Background(), key, p)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(txs))
	for i, tx := range txs {
		ids[i] = tx.ID
	}
	return ids
}

// Without a limit the whole history is answered, a batch at a time, in the statement's order,
// whatever its length against the batch: shorter, exactly one, one more, several, with
// transactions that share their second and transactions that never said when they happened
// (last), from an offset and within since and until.
func TestWholeHistoryInBatches(t *testing.T) {
	const batch = 4
	ctx := context.Background()
	store := &rewardstore.Store{Pool: testDB.Pool}
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, n := range []int{0, 1, batch - 1, batch, batch + 1, 2 * batch, 3*batch + 2} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			key := newKey()
			txs := make([]flexv1.RewardTransaction, 0, n)
			for i := range n {
				tx := flexv1.RewardTransaction{ID: uuid.NewString(), Type: "flex event", CreditPence: int64(i + 1)}
				switch {
				case i%5 == 4: // never said when: last in the statement
				case i%3 == 0: // three share a second
					tx.StartTime = &metav1.Time{Time: base.Add(time.Duration(i/3) * time.Hour)}
				default:
					tx.SettlementDate = base.AddDate(0, 0, i).Format(time.DateOnly)
				}
				txs = append(txs, tx)
			}
			if n > 0 {
				if err := store.AppendMany(ctx, key, txs, rewardstore.SourceAPI); err != nil {
					t.Fatal(err)
				}
			}
			s := unkept()
			s.batch = batch
			want := statement(t, key, rewardstore.Page{})
			if len(want) != n {
				t.Fatalf("the statement holds %d of %d transactions", len(want), n)
			}
			got, widest := readAll(t, s, key, TransactionsQuery{})
			if !slices.Equal(got, want) {
				t.Errorf("whole history:\n got %v\nwant %v", got, want)
			}
			if widest > batch {
				t.Errorf("a batch held %d transactions, want at most %d", widest, batch)
			}
			if n > 2 {
				got, _ = readAll(t, s, key, TransactionsQuery{Paging: app.Paging{Offset: 2}})
				if !slices.Equal(got, want[2:]) {
					t.Errorf("from offset 2:\n got %v\nwant %v", got, want[2:])
				}
				since, until := base.Add(time.Hour), base.AddDate(0, 0, n-2)
				want := statement(t, key, rewardstore.Page{Since: since, Until: until})
				got, _ = readAll(t, s, key, TransactionsQuery{Since: since, Until: until})
				if !slices.Equal(got, want) {
					t.Errorf("within since and until:\n got %v\nwant %v", got, want)
				}
			}
		})
	}
}

// A page of limit transactions says whether more follow, read or kept.
func TestPageSaysWhetherMoreFollow(t *testing.T) {
	s := listening(t)
	key := newKey()
	now := time.Now()
	for i := range 3 {
		if _, _, err := s.credit(context.Background(), key, creditOf(int64(i+1), now.Add(time.Duration(i)*time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		limit, offset, n int
		more             bool
	}{{2, 0, 2, true}, {3, 0, 3, false}, {2, 1, 2, false}, {1, 1, 1, true}} {
		for range 2 { // read, then (once the page is kept) kept
			p, err := s.transactionsOf(context.Background(), key, TransactionsQuery{Paging: app.Paging{Limit: c.limit, Offset: c.offset}})
			if err != nil {
				t.Fatal(err)
			}
			if p.To-p.From != c.n || p.More != c.more || p.Streamed() {
				t.Errorf("limit %d offset %d (kept %v): %d transactions, more %v, streamed %v; want %d, more %v",
					c.limit, c.offset, p.Kept, p.To-p.From, p.More, p.Streamed(), c.n, c.more)
			}
		}
	}
}

// Reading the whole of a long history holds one batch, not the history: the live heap while
// it is read grows by far less than the history's compact form would take (48 bytes a
// transaction), let alone its records or its encoding.
func TestWholeHistoryHoldsOneBatch(t *testing.T) {
	const n = 20000
	ctx := context.Background()
	key := newKey()
	// A long history written at once (the test's setup, not a use case): three transactions a
	// second, and a few that never said when they happened.
	if _, err := testDB.Pool.Exec(ctx, `INSERT INTO reward_sites (organisation, site_id) VALUES ($1, $2)`,
		key.Namespace, key.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := testDB.Pool.Exec(ctx, `INSERT INTO reward_transactions (organisation, site_id, transaction_id,
		transaction_type, credit_pence, start_at, occurred_at, source, request_digest)
		SELECT $1, $2, gen_random_uuid(), 'flex event', i,
			CASE WHEN i % 1000 = 0 THEN NULL ELSE timestamptz '2020-01-01 00:00:00+00' + (i / 3) * interval '1 second' END,
			CASE WHEN i % 1000 = 0 THEN NULL ELSE timestamptz '2020-01-01 00:00:00+00' + (i / 3) * interval '1 second' END,
			'settlement', '\x00'::bytea
		FROM generate_series(1, $3::int) AS i`, key.Namespace, key.ID, n); err != nil {
		t.Fatal(err)
	}
	s := unkept()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	p, err := s.transactionsOf(ctx, key, TransactionsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Streamed() {
		t.Fatal("a history of 20,000 transactions is not read a batch at a time")
	}
	var peak uint64
	count := 0
	for more := true; more; more, err = p.Next(ctx) {
		count += p.To - p.From
		if count%(10*s.batch) == 0 { // every tenth batch: what the reader holds now
			peak = max(peak, heap())
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if count != n {
		t.Fatalf("read %d of %d transactions", count, n)
	}
	grew := int64(peak) - int64(before)
	t.Logf("live heap while reading %d transactions: %+d bytes (a batch of %d packed: %d)", n, grew, s.batch, s.batch*48)
	if whole := int64(n * 48); grew > whole/4 {
		t.Errorf("the live heap grew by %d bytes while reading the history, want far less than its compact form (%d)", grew, whole)
	}
}

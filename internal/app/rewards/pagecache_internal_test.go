package rewards

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/ledger"
	"github.com/flexsite/flexsite/internal/pagestore"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

var testDB *dbtest.Database

func TestMain(m *testing.M) {
	dbtest.Main(m, &testDB)
}

// listening is a Service on the test database whose kept pages are in use (Listen runs).
func listening(t *testing.T) *Service {
	t.Helper()
	s := New(Config{Store: &rewardstore.Store{Pool: testDB.Pool}, Private: &pagestore.Store{Pool: testDB.Pool}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Listen(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	eventually(t, func() bool { return s.pages.Listening() }, "the service listens")
	return s
}

func eventually(t *testing.T, f func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if f() {
			return
		}
	}
	t.Fatalf("timed out waiting until %s", what)
}

func newKey() rewardstore.Site {
	return rewardstore.Site{Namespace: "org-" + uuid.NewString()[:8], ID: uuid.NewString()}
}

func creditOf(pence int64, at time.Time) flexv1.RewardTransaction {
	return flexv1.RewardTransaction{ID: uuid.NewString(), Type: "flex event", CreditPence: pence,
		StartTime: &metav1.Time{Time: at.UTC().Truncate(time.Second)}}
}

var defaultQuery = TransactionsQuery{Paging: app.Paging{Limit: 100}}

// read answers the default page as a door would: the kept body, or the ids it encodes (and
// keeps); kept says which.
func read(t *testing.T, s *Service, key rewardstore.Site) (body string, kept bool) {
	t.Helper()
	p, err := s.transactionsOf(context.Background(), key, defaultQuery)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := p.From; i < p.To; i++ {
		ids = append(ids, p.Ledger.ID(i))
	}
	return strings.Join(ids, ","), p.Kept
}

// readKept reads until the page is answered from what is kept (the notification of the
// write that made it, which drops it, may come after the first read) and answers it.
func readKept(t *testing.T, s *Service, key rewardstore.Site) string {
	t.Helper()
	var body string
	eventually(t, func() bool {
		var kept bool
		body, kept = read(t, s, key)
		return kept
	}, "a read is answered from the kept page")
	return body
}

func TestKeptPageDroppedByOwnWrite(t *testing.T) {
	s := listening(t)
	key := newKey()
	now := time.Now()
	if _, _, err := s.credit(context.Background(), key, creditOf(100, now)); err != nil {
		t.Fatal(err)
	}
	first := readKept(t, s, key)
	if again, kept := read(t, s, key); !kept || again != first {
		t.Fatalf("second read: kept %v, %q; want the kept %q", kept, again, first)
	}
	tx := creditOf(50, now.Add(time.Hour))
	if _, _, err := s.credit(context.Background(), key, tx); err != nil {
		t.Fatal(err)
	}
	// At once, with no wait for the notification.
	if body, _ := read(t, s, key); !strings.HasPrefix(body, tx.ID) {
		t.Fatalf("after this replica's write the page is %q, want %s first", body, tx.ID)
	}
	if b, err := s.keptBalance(context.Background(), &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace,
		Labels: map[string]string{flexv1.IDLabel: key.ID}}}); err != nil || b.Current != 150 {
		t.Fatalf("balance %+v, %v; want 150", b, err)
	}
}

func TestKeptPageDroppedByAnotherReplicasWrite(t *testing.T) {
	s := listening(t)
	other := listening(t) // another replica: its own Service and pool on the same database
	pool, err := db.Open(context.Background(), testDB.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	other.Store = &rewardstore.Store{Pool: pool}
	key := newKey()
	now := time.Now()
	if _, _, err := other.credit(context.Background(), key, creditOf(100, now)); err != nil {
		t.Fatal(err)
	}
	readKept(t, s, key)
	tx := creditOf(50, now.Add(time.Hour))
	if _, _, err := other.credit(context.Background(), key, tx); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { body, _ := read(t, s, key); return strings.HasPrefix(body, tx.ID) },
		"the other replica's write is read")
	// And a write straight through a Store (the controller's, the admin tool's).
	tx2 := creditOf(20, now.Add(2*time.Hour))
	if _, _, err := (&rewardstore.Store{Pool: pool}).Append(context.Background(), key, tx2, rewardstore.SourceSettlement); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { body, _ := read(t, s, key); return strings.HasPrefix(body, tx2.ID) },
		"a write through another Store is read")
}

func TestLostListenerDropsKeptPages(t *testing.T) {
	s := listening(t)
	key := newKey()
	if _, _, err := s.credit(context.Background(), key, creditOf(100, time.Now())); err != nil {
		t.Fatal(err)
	}
	readKept(t, s, key)
	// The listening connection dies (a database restart, a network cut).
	if _, err := testDB.Pool.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE query = 'LISTEN `+rewardstore.ChangedChannel+`' AND pid <> pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return !s.pages.Listening() && s.KeptPageBytes() == 0 }, "the kept pages are dropped")
	if _, kept := read(t, s, key); kept {
		t.Fatal("answered from a kept page while not listening")
	}
	// Listening again, pages are kept again.
	eventually(t, func() bool { return s.pages.Listening() }, "the service listens again")
	readKept(t, s, key)
}

// The bound holds a 10,000-site fleet's pages of a year of weekly rewards (issue 39): a page is
// kept in the ledger's compact form, so a fleet read in turn is answered from memory.
func TestKeptPagesHoldTenThousandSites(t *testing.T) {
	c := newPageCache(maxKeptPageBytes)
	c.Reset(true)
	year := make([]flexv1.RewardTransaction, 0, 52)
	for i := range 52 {
		year = append(year, flexv1.RewardTransaction{ID: uuid.NewString(), Type: "flex period", CreditPence: int64(i)})
	}
	const sites = 10000
	for i := range sites {
		key := rewardstore.Site{Namespace: "org", ID: fmt.Sprintf("site-%d", i)}
		epoch := c.Begin()
		c.keepBalance(key, epoch, household.Balance{Current: 1})
		c.keepPage(key, pageKey{limit: 100}, epoch, ledger.New(year))
	}
	if c.Len() != sites {
		t.Errorf("%d of %d sites' pages kept within %d bytes (%d used)", c.Len(), sites, maxKeptPageBytes, c.Bytes())
	}
}

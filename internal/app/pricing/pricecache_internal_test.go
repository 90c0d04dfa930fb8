package pricing

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/pricestore"
)

var testDB *dbtest.Database

func TestMain(m *testing.M) {
	dbtest.Main(m, &testDB)
}

// The kept prices are a market's for one horizon: the epoch rule, the listening and the byte
// bound are internal/keptcache's (its tests).
func TestPriceCacheKeepsOneHorizon(t *testing.T) {
	c := newPriceCache(maxKeptPriceBytes)
	c.Reset(true) // listening
	k := marketKey{"org", "price_curve"}
	start := time.Date(2026, 11, 27, 17, 30, 0, 0, time.UTC)
	span := pricestore.Span{Prices: []prices.Price{{Start: start, Centi: 100}}}

	c.keep(k, c.Begin(), start, span, []byte("curve"))
	if e := c.get(k, start); e == nil || string(e.curve) != "curve" {
		t.Fatalf("an undisturbed read was not kept: %+v", e)
	}
	if got, want := c.Bytes(), keptBookkeeping+keptPriceBytes+len("curve"); got != want {
		t.Errorf("the entry is counted for %d bytes, want %d", got, want)
	}
	if c.get(k, start.Add(prices.HalfHour)) != nil {
		t.Fatal("the next period's horizon was served the kept one")
	}
	// A declaration of another market leaves it; one of its own drops it.
	c.Invalidate(marketKey{"other", "price_curve"})
	if c.get(k, start) == nil {
		t.Fatal("another market's declaration dropped the kept prices")
	}
	c.Invalidate(k)
	if c.get(k, start) != nil {
		t.Fatal("the market's declaration left its kept prices")
	}
}

// wholeDay is a checked day: every period priced at base hundredths.
func wholeDay(t *testing.T, d prices.Day, base prices.Centi) []prices.Price {
	t.Helper()
	periods := d.Periods()
	in := make([]prices.Price, 0, len(periods))
	for _, start := range periods {
		in = append(in, prices.Price{Start: start, Centi: base})
	}
	out, problems := prices.CheckDay(d, in)
	if problems != nil {
		t.Fatal(problems)
	}
	return out
}

// waitFor polls cond until it holds (the notification's delivery is asynchronous).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}

// A replica keeps the prices it read while it listens; a declaration committed through another
// pool (another replica) reaches it by PostgreSQL's notification, and its next read sees the new
// prices. Losing the listening connection stops the kept prices being served until it listens
// again.
func TestKeptPricesFollowNotifications(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	now := time.Date(2027, 2, 3, 10, 7, 0, 0, time.UTC)
	org, market := "org-kept", "price_curve"
	today := prices.DayOf(now)
	replica := &Service{Log: logr.Discard(), Prices: &pricestore.Store{Pool: testDB.Pool},
		Now: func() time.Time { return now }, kept: newPriceCache(maxKeptPriceBytes)}
	otherPool, err := db.Open(ctx, testDB.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer otherPool.Close()
	other := &pricestore.Store{Pool: otherPool}

	if _, err := other.Put(ctx, org, market, today, wholeDay(t, today, 1000), "p", now); err != nil {
		t.Fatal(err)
	}
	listened := make(chan struct{})
	go func() { defer close(listened); replica.Listen(ctx) }()
	waitFor(t, "the replica listens", replica.KeepsPrices)

	first := func() prices.Centi {
		t.Helper()
		e, _, err := replica.horizonPrices(ctx, org, market, now)
		if err != nil {
			t.Fatal(err)
		}
		return e.span.Prices[0].Centi
	}
	k, start := marketKey{org, market}, prices.PeriodStart(now)
	if got := first(); got != 1000 {
		t.Fatalf("first read: %v", got)
	}
	if replica.kept.get(k, start) == nil {
		t.Fatal("the read was not kept while listening")
	}

	// Another replica declares the day again: the notification drops the entry, and the next
	// read has the new prices.
	if _, err := other.Put(ctx, org, market, today, wholeDay(t, today, 2000), "p", now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the notification drops the kept prices", func() bool { return replica.kept.get(k, start) == nil })
	if got := first(); got != 2000 {
		t.Fatalf("after another replica's declaration: %v, want 2000", got)
	}

	// This replica's own declaration drops its entry at once (read-your-writes, no waiting).
	if got := first(); got != 2000 || replica.kept.get(k, start) == nil {
		t.Fatal("the read after the notification was not kept")
	}
	if _, err := replica.Prices.Put(ctx, org, market, today, wholeDay(t, today, 2500), "p", now); err != nil {
		t.Fatal(err)
	}
	replica.kept.Invalidate(k) // as DeclarePrices does after Put
	if got := first(); got != 2500 {
		t.Fatalf("after this replica's declaration: %v, want 2500", got)
	}

	// The listening connection is lost: nothing kept is served any more (the fault first) ...
	var terminated int
	if err := otherPool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN '||$1`, pricestore.ChangedChannel).Scan(&terminated); err != nil {
		t.Fatal(err)
	}
	if terminated != 1 {
		t.Fatalf("%d listening connections terminated, want 1", terminated)
	}
	waitFor(t, "the lost connection is noticed", func() bool { return !replica.KeepsPrices() })
	if replica.kept.get(k, start) != nil {
		t.Fatal("kept prices served after the listening connection was lost")
	}
	// ... and what is declared meanwhile is read from the database ...
	if _, err := other.Put(ctx, org, market, today, wholeDay(t, today, 3000), "p", now); err != nil {
		t.Fatal(err)
	}
	// ... until it listens again, from when reads are kept again (the recovery).
	waitFor(t, "the replica listens again", replica.KeepsPrices)
	if got := first(); got != 3000 {
		t.Fatalf("after the reconnection: %v, want 3000", got)
	}
	if replica.kept.get(k, start) == nil {
		t.Fatal("reads are not kept after listening again")
	}
	cancel()
	<-listened
	if replica.KeepsPrices() {
		t.Error("still keeping prices after Listen returned")
	}
}

// pricesIn is the window of the (sorted) prices in [from, to), and appending to it never
// writes into the prices it was cut from (they may be the kept ones).
func TestPricesInIsAReadOnlyWindow(t *testing.T) {
	at := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	ps := make([]prices.Price, 0, 6)
	for i := range 6 {
		ps = append(ps, prices.Price{Start: at.Add(time.Duration(i) * prices.HalfHour), Centi: prices.Centi(i)})
	}
	cases := []struct {
		from, to   time.Time
		first, len int
	}{
		{at, at.Add(3 * time.Hour), 0, 6},
		{at.Add(prices.HalfHour), at.Add(time.Hour), 1, 1},
		{at.Add(time.Hour), at.Add(10 * time.Hour), 2, 4},
		{at.Add(-time.Hour), at, 0, 0},
		{at.Add(5 * time.Hour), at.Add(6 * time.Hour), 0, 0},
	}
	for _, c := range cases {
		got := pricesIn(ps, c.from, c.to)
		if len(got) != c.len || (c.len > 0 && got[0].Centi != prices.Centi(c.first)) {
			t.Errorf("[%s, %s): %v", c.from, c.to, got)
		}
		for _, p := range got {
			if p.Start.Before(c.from) || !p.Start.Before(c.to) {
				t.Errorf("[%s, %s): %s is outside", c.from, c.to, p.Start)
			}
		}
		_ = append(got, prices.Price{Centi: 999})
	}
	for i, p := range ps {
		if p.Centi != prices.Centi(i) {
			t.Fatalf("the prices cut from were written: %v", ps)
		}
	}
	if got := pricesIn(nil, at, at.Add(time.Hour)); len(got) != 0 {
		t.Errorf("no prices: %v", got)
	}
}

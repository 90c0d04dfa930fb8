package pricestore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/pricestore"
)

var testDB *dbtest.Database

func TestMain(m *testing.M) {
	dbtest.Main(m, &testDB)
}

func day(s string) prices.Day {
	d, err := prices.ParseDay(s)
	if err != nil {
		panic(err)
	}
	return d
}

// declared is a checked day: every period priced at base + its index (hundredths).
func declared(t *testing.T, d prices.Day, base int) []prices.Price {
	t.Helper()
	periods := d.Periods()
	in := make([]prices.Price, 0, len(periods))
	for i, start := range periods {
		in = append(in, prices.Price{Start: start, Centi: prices.Centi(base + i)})
	}
	out, problems := prices.CheckDay(d, in)
	if problems != nil {
		t.Fatal(problems)
	}
	return out
}

func rows(t *testing.T, org, market string, d prices.Day) int {
	t.Helper()
	var n int
	if err := testDB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM market_prices
		WHERE organisation = $1 AND market = $2 AND day = $3`, org, market, d.String()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func samePrices(a, b []prices.Price) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Start.Equal(b[i].Start) || a[i].Centi != b[i].Centi {
			return false
		}
	}
	return true
}

func TestPutThenDay(t *testing.T) {
	ctx := context.Background()
	s := &pricestore.Store{Pool: testDB.Pool}
	d := day("2026-10-25") // 50 periods
	first := declared(t, d, -5000)
	now := time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC)
	replaced, err := s.Put(ctx, "org-a", "price_curve", d, first, "alice", now)
	if err != nil || replaced {
		t.Fatalf("first declaration: replaced %v, %v", replaced, err)
	}
	got, ok, err := s.Day(ctx, "org-a", "price_curve", d)
	if err != nil || !ok {
		t.Fatalf("Day: %v, %v", ok, err)
	}
	if !samePrices(got.Prices, first) || got.UpdatedBy != "alice" || !got.UpdatedAt.Equal(now) {
		t.Errorf("read back %d prices by %q at %s, want %d by alice at %s", len(got.Prices), got.UpdatedBy, got.UpdatedAt, len(first), now)
	}
	// Another organisation's, another market's and another day's are not declared.
	for _, q := range []struct {
		org, market string
		d           prices.Day
	}{{"org-b", "price_curve", d}, {"org-a", "n2ex", d}, {"org-a", "price_curve", day("2026-10-26")}} {
		if got, ok, err := s.Day(ctx, q.org, q.market, q.d); err != nil || ok || len(got.Prices) != 0 {
			t.Errorf("%+v: %v, %v, %v", q, got, ok, err)
		}
	}

	// A second declaration replaces the day whole: no row of the first is left.
	second := declared(t, d, 7000)
	later := now.Add(time.Hour)
	replaced, err = s.Put(ctx, "org-a", "price_curve", d, second, "bob", later)
	if err != nil || !replaced {
		t.Fatalf("second declaration: replaced %v, %v", replaced, err)
	}
	got, ok, err = s.Day(ctx, "org-a", "price_curve", d)
	if err != nil || !ok || !samePrices(got.Prices, second) || got.UpdatedBy != "bob" || !got.UpdatedAt.Equal(later) {
		t.Errorf("after the second declaration: %d prices by %q at %s, %v", len(got.Prices), got.UpdatedBy, got.UpdatedAt, err)
	}
	if n := rows(t, "org-a", "price_curve", d); n != 50 {
		t.Errorf("%d rows for the day, want 50", n)
	}
}

func TestRange(t *testing.T) {
	ctx := context.Background()
	s := &pricestore.Store{Pool: testDB.Pool}
	today, tomorrow := day("2026-11-27"), day("2026-11-28")
	t0 := time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC)
	t1 := t0.Add(24 * time.Hour)
	if _, err := s.Put(ctx, "org-r", "price_curve", today, declared(t, today, 1000), "p", t0); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 10, 7, 0, 0, time.UTC)
	from, to := prices.PeriodStart(now), prices.Tomorrow(now).At(23, 0)

	// Tomorrow not declared yet: today's prices from 10:00 to midnight, 28 of them (the span
	// runs to tomorrow's 23:00; prices.Horizon cuts it afterwards).
	span, err := s.Range(ctx, "org-r", "price_curve", from, to, prices.Tomorrow(now))
	if err != nil {
		t.Fatal(err)
	}
	if span.DayDeclared || len(span.Prices) != 28 || !span.LastChanged.Equal(t0) {
		t.Errorf("before tomorrow: declared %v, %d prices, last changed %s", span.DayDeclared, len(span.Prices), span.LastChanged)
	}
	if len(span.Prices) > 0 && (!span.Prices[0].Start.Equal(from) || span.Prices[0].Centi != 1000+20) {
		t.Errorf("the span's first price: %+v", span.Prices[0])
	}

	// Tomorrow declared: today's 28 and tomorrow's to 23:00 (46), in order, last changed t1.
	if _, err := s.Put(ctx, "org-r", "price_curve", tomorrow, declared(t, tomorrow, 5000), "p", t1); err != nil {
		t.Fatal(err)
	}
	span, err = s.Range(ctx, "org-r", "price_curve", from, to, prices.Tomorrow(now))
	if err != nil {
		t.Fatal(err)
	}
	if !span.DayDeclared || len(span.Prices) != 28+46 || !span.LastChanged.Equal(t1) {
		t.Errorf("with tomorrow: declared %v, %d prices, last changed %s", span.DayDeclared, len(span.Prices), span.LastChanged)
	}
	for i := 1; i < len(span.Prices); i++ {
		if span.Prices[i].Start.Sub(span.Prices[i-1].Start) != 30*time.Minute {
			t.Fatalf("prices out of order at %d: %s after %s", i, span.Prices[i].Start, span.Prices[i-1].Start)
		}
	}
	if last := span.Prices[len(span.Prices)-1]; !last.Start.Equal(to.Add(-30*time.Minute)) || last.Centi != 5000+45 {
		t.Errorf("the span's last price: %+v", last)
	}

	// The day asked about is the one reported, not any day of the span.
	span, err = s.Range(ctx, "org-r", "price_curve", from, to, day("2026-11-29"))
	if err != nil || span.DayDeclared || len(span.Prices) != 74 {
		t.Errorf("another day: declared %v, %d prices, %v", span.DayDeclared, len(span.Prices), err)
	}
	// Another organisation's and another market's span is empty.
	for _, q := range [][2]string{{"org-other", "price_curve"}, {"org-r", "other"}} {
		span, err = s.Range(ctx, q[0], q[1], from, to, prices.Tomorrow(now))
		if err != nil || span.DayDeclared || len(span.Prices) != 0 || !span.LastChanged.IsZero() {
			t.Errorf("%v: %+v, %v", q, span, err)
		}
	}
}

// Two writers (each its own pool, as two replicas) declaring the same day over and over, at
// once: after each round the day is whole and wholly one writer's.
func TestConcurrentPutsLeaveOneWholeDay(t *testing.T) {
	ctx := context.Background()
	d := day("2026-11-30")
	var wg sync.WaitGroup
	for round := range 10 {
		for w := range 2 {
			pool, err := pgxpool.New(ctx, testDB.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			s := &pricestore.Store{Pool: pool}
			ps := declared(t, d, (w+1)*100000)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.Put(ctx, "org-c", "price_curve", d, ps, fmt.Sprintf("writer-%d", w), time.Now()); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		var n, writers, bases int
		if err := testDB.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT updated_by), count(DISTINCT price_centi / 100000)
			FROM market_prices WHERE organisation = 'org-c' AND market = 'price_curve' AND day = $1`, d.String()).Scan(&n, &writers, &bases); err != nil {
			t.Fatal(err)
		}
		if n != 48 || writers != 1 || bases != 1 {
			t.Fatalf("round %d: %d rows from %d writers (%d price sets), want 48 from one", round, n, writers, bases)
		}
	}
}

// The database taken away: every call says Unavailable; back, the store works again.
// (Last in the file: it stops the server.)
func TestUnavailable(t *testing.T) {
	if !testDB.CanStop() {
		t.Skip("the test database's server is not this process's")
	}
	ctx := context.Background()
	s := &pricestore.Store{Pool: testDB.Pool}
	d := day("2026-12-01")
	ps := declared(t, d, 1)
	if err := testDB.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "org-u", "price_curve", d, ps, "u", time.Now()); !db.Unavailable(err) {
		t.Errorf("Put with the database stopped: %v", err)
	}
	if _, _, err := s.Day(ctx, "org-u", "price_curve", d); !db.Unavailable(err) {
		t.Errorf("Day with the database stopped: %v", err)
	}
	if _, err := s.Range(ctx, "org-u", "price_curve", d.Start(), d.End(), d); !db.Unavailable(err) {
		t.Errorf("Range with the database stopped: %v", err)
	}
	if err := testDB.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, "org-u", "price_curve", d, ps, "u", time.Now()); err != nil {
		t.Fatalf("after the database came back: %v", err)
	}
	if got, ok, err := s.Day(ctx, "org-u", "price_curve", d); err != nil || !ok || len(got.Prices) != 48 {
		t.Errorf("after the database came back: %d prices, %v, %v", len(got.Prices), ok, err)
	}
}

// A declaration notifies ChangedChannel with its organisation and market at its commit.
func TestPutNotifiesAtCommit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := testDB.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+pricestore.ChangedChannel); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(context.Background(), "UNLISTEN *") }()
	s := &pricestore.Store{Pool: testDB.Pool}
	d := day("2026-12-01")
	if _, err := s.Put(ctx, "org-notify", "n2ex", d, declared(t, d, 100), "p", time.Now()); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Conn().WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Channel != pricestore.ChangedChannel || n.Payload != "org-notify/n2ex" {
		t.Errorf("notified %q on %q, want org-notify/n2ex on %q", n.Payload, n.Channel, pricestore.ChangedChannel)
	}
}

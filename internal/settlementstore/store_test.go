package settlementstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/rewardstore"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/settlementstore"
)

var testDB *dbtest.Database

func TestMain(m *testing.M) {
	dbtest.Main(m, &testDB)
}

var (
	start = time.Date(2026, 11, 17, 17, 30, 0, 0, time.UTC) // a Tuesday, GMT
	rules = settlement.Event{Start: start, End: start.Add(time.Hour), Direction: settlement.TurnDown, RateCentipence: 2500}
)

// write puts a site's asset's readings of a label (kW, half-hourly) in the window's two
// half-hours on 12 working days before the event and on its day.
func write(t *testing.T, org, site, asset, label string, before, during [2]float64) {
	t.Helper()
	put := func(at time.Time, kwh float64) {
		if _, err := testDB.Pool.Exec(context.Background(), `INSERT INTO readings (organisation, site_id, asset_id, label,
			start_at, end_at, value) VALUES ($1, $2, $3, $4, $5, $6, $7)`, org, site, asset, label, at,
			at.Add(30*time.Minute), kwh*2); err != nil {
			t.Fatal(err)
		}
	}
	for d, n := start.AddDate(0, 0, -1), 0; n < 12; d = d.AddDate(0, 0, -1) {
		if d.Weekday() == time.Saturday || d.Weekday() == time.Sunday {
			continue
		}
		put(d, before[0])
		put(d.Add(30*time.Minute), before[1])
		n++
	}
	put(start, during[0])
	put(start.Add(30*time.Minute), during[1])
}

// A site with a boundary meter is settled on the meter's readings alone; one without, on the
// sum of its assets'. The spec's first worked example: 35 p, −1.100 kWh.
func TestComputeReadsTheBoundaryMeterElseTheAssets(t *testing.T) {
	ctx := context.Background()
	store := &settlementstore.Store{Pool: testDB.Pool}
	write(t, "org-c", "metered", "meter", "boundary_import_kw", [2]float64{1.8, 2.6}, [2]float64{0.4, 2.9})
	write(t, "org-c", "metered", "charger", "charger_consumption_energy_kwh", [2]float64{5, 5}, [2]float64{0, 0})
	res, err := store.Compute(ctx, "org-c", "ev", rules, settlementstore.Site{Source: settlementstore.Source{
		SiteID: "metered", BoundaryAssetIDs: []string{"meter"}}})
	if err != nil || res.Status != settlement.Settled || res.CreditPence != 35 || res.FlexWh != -1100 {
		t.Fatalf("boundary meter: %+v, %v", res, err)
	}
	write(t, "org-c", "assets", "a", "boundary_import_kw", [2]float64{1, 2}, [2]float64{0.2, 2.4})
	write(t, "org-c", "assets", "b", "battery_inverter_import_kw", [2]float64{0.8, 0.6}, [2]float64{0.2, 0.5})
	res, err = store.Compute(ctx, "org-c", "ev", rules, settlementstore.Site{Source: settlementstore.Source{SiteID: "assets"}})
	if err != nil || res.Status != settlement.Settled || res.CreditPence != 35 || res.FlexWh != -1100 {
		t.Fatalf("sum of assets: %+v, %v", res, err)
	}
}

// Two settlers recording the same sites at once, and again: each site once, each credit once
// (one transaction and one outbox event per credited site).
func TestSettleAllRecordsEachSiteOnce(t *testing.T) {
	ctx := context.Background()
	store := &settlementstore.Store{Pool: testDB.Pool}
	sites := []string{"s1", "s2", "s3", "s4"}
	due := make([]settlementstore.Due, 0, len(sites))
	for _, s := range sites {
		write(t, "org-o", s, "meter", "boundary_import_kw", [2]float64{1.8, 2.6}, [2]float64{0.4, 2.9})
		res, err := store.Compute(ctx, "org-o", "ev", rules, settlementstore.Site{Source: settlementstore.Source{SiteID: s}})
		if err != nil {
			t.Fatal(err)
		}
		due = append(due, settlementstore.Due{SiteID: s, Result: res})
	}
	ev := settlementstore.EventOf("ev", rules)
	var wg sync.WaitGroup
	recorded := make([]int, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() { recorded[i], errs[i] = store.SettleAll(ctx, "org-o", ev, due) })
	}
	wg.Wait()
	total := 0
	for i := range 3 {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		total += recorded[i]
	}
	if again, err := store.SettleAll(ctx, "org-o", ev, due); err != nil || again != 0 {
		t.Fatalf("settling again recorded %d, %v", again, err)
	}
	var settled, txs, pence, outbox int
	if err := testDB.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM flex_event_settlements WHERE organisation = 'org-o'),
		(SELECT count(*) FROM reward_transactions WHERE organisation = 'org-o'),
		(SELECT coalesce(sum(credit_pence), 0) FROM reward_transactions WHERE organisation = 'org-o'),
		(SELECT count(*) FROM outbox WHERE organisation = 'org-o')`).Scan(&settled, &txs, &pence, &outbox); err != nil {
		t.Fatal(err)
	}
	if total != len(sites) || settled != len(sites) || txs != len(sites) || pence != 35*len(sites) || outbox != len(sites) {
		t.Fatalf("recorded %d; rows: %d settlements, %d transactions (%d p), %d outbox events", total, settled, txs, pence, outbox)
	}
	ledger := &rewardstore.Store{Pool: testDB.Pool}
	for _, s := range sites {
		if rev, err := ledger.Revision(ctx, rewardstore.Site{Namespace: "org-o", ID: s}); err != nil || rev != 1 {
			t.Errorf("site %s: history revision %d (%v), want 1: its credit, counted once", s, rev, err)
		}
	}
	got, err := store.OfSite(ctx, "org-o", "s1")
	if err != nil || len(got) != 1 || len(got[0].HalfHours) != 2 || *got[0].HalfHours[0].BaselineMilliWh != 1_800_000 ||
		got[0].HalfHours[1].ActualMilliWh != 2_900_000 || got[0].TransactionID == nil ||
		*got[0].TransactionID != settlementstore.TransactionID("org-o", "ev", "s1") {
		t.Fatalf("stored settlement: %+v, %v", got, err)
	}
}

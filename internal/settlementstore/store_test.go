package settlementstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
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

// An API client of the organisation may post a transaction under the id settlement derives for
// a site (TransactionID is public arithmetic). That neither rolls the batch back (the event's
// other sites settle, on every reconcile) nor credits twice: a site whose id holds another
// transaction is skipped as transaction_id_taken, one whose id holds the very same credit is
// settled with it. Another organisation's use of the id is none of this organisation's.
func TestSettleAllPassesOverATakenTransactionID(t *testing.T) {
	ctx := context.Background()
	store := &settlementstore.Store{Pool: testDB.Pool}
	ledger := &rewardstore.Store{Pool: testDB.Pool}
	const org = "org-taken"
	sites := []string{"free", "taken", "taken-elsewhere", "same-credit", "taken-by-other-org"}
	due := make([]settlementstore.Due, 0, len(sites))
	for _, s := range sites {
		write(t, org, s, "meter", "boundary_import_kw", [2]float64{1.8, 2.6}, [2]float64{0.4, 2.9})
		res, err := store.Compute(ctx, org, "ev", rules, settlementstore.Site{Source: settlementstore.Source{SiteID: s}})
		if err != nil || res.CreditPence != 35 {
			t.Fatalf("%s: %+v, %v", s, res, err)
		}
		due = append(due, settlementstore.Due{SiteID: s, Result: res})
	}
	ev := settlementstore.EventOf("ev", rules)
	derived := func(site string) string { return settlementstore.TransactionID(org, "ev", site).String() }
	at := metav1.NewTime(start)
	end := metav1.NewTime(start.Add(time.Hour))
	post := func(site rewardstore.Site, tx flexv1.RewardTransaction) {
		t.Helper()
		if _, _, err := ledger.Append(ctx, site, tx, rewardstore.SourceAPI); err != nil {
			t.Fatal(err)
		}
	}
	goodwill := func(id string) flexv1.RewardTransaction {
		return flexv1.RewardTransaction{ID: id, Type: "goodwill credit", CreditPence: 100, StartTime: &at}
	}
	post(rewardstore.Site{Namespace: org, ID: "taken"}, goodwill(derived("taken")))
	post(rewardstore.Site{Namespace: org, ID: "another-site"}, goodwill(derived("taken-elsewhere")))
	flexWh := due[3].Result.FlexWh
	post(rewardstore.Site{Namespace: org, ID: "same-credit"}, flexv1.RewardTransaction{ID: derived("same-credit"),
		Type: "flex event", CreditPence: 35, StartTime: &at, EndTime: &end, FlexWh: &flexWh})
	post(rewardstore.Site{Namespace: "org-other", ID: "taken-by-other-org"}, goodwill(derived("taken-by-other-org")))

	recorded, err := store.SettleAll(ctx, org, ev, due)
	if err != nil || recorded != len(sites) {
		t.Fatalf("settling: recorded %d, %v; want every site recorded, no error", recorded, err)
	}
	if again, err := store.SettleAll(ctx, org, ev, due); err != nil || again != 0 {
		t.Fatalf("settling again: recorded %d, %v", again, err)
	}
	settled, err := store.OfEvent(ctx, org, "ev")
	if err != nil {
		t.Fatal(err)
	}
	for site, want := range map[string]struct {
		status settlement.Status
		reason settlement.Reason
		credit int64
		// balance is the site's: its settlement's credit, or the client's transaction alone.
		balance int64
	}{
		"free":               {settlement.Settled, "", 35, 35},
		"taken":              {settlement.Skipped, settlement.TransactionIDTaken, 0, 100},
		"taken-elsewhere":    {settlement.Skipped, settlement.TransactionIDTaken, 0, 0},
		"same-credit":        {settlement.Settled, "", 35, 35},
		"taken-by-other-org": {settlement.Settled, "", 35, 35},
	} {
		got := settled[site]
		if got.Status != want.status || got.Reason != want.reason || got.CreditPence != want.credit ||
			(want.status == settlement.Settled) != (got.TransactionID != nil) {
			t.Errorf("%s: %s %q %d p (transaction %v), want %s %q %d p", site, got.Status, got.Reason, got.CreditPence,
				got.TransactionID, want.status, want.reason, want.credit)
		}
		key := rewardstore.Site{Namespace: org, ID: site}
		if b, err := ledger.Balance(ctx, key); err != nil || b.Current != want.balance {
			t.Errorf("%s: balance %d (%v), want %d: credited once at most", site, b.Current, err, want.balance)
		}
		var events int
		if err := testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE organisation = $1 AND site_id = $2`,
			org, site).Scan(&events); err != nil {
			t.Fatal(err)
		}
		if wantEvents := map[bool]int{true: 1, false: 0}[want.balance > 0]; events != wantEvents {
			t.Errorf("%s: %d outbox events, want %d", site, events, wantEvents)
		}
	}
	totals, err := store.EventTotals(ctx, org, "ev")
	if err != nil || totals.Settled != 3 || totals.CreditPence != 105 || totals.Skipped[settlement.TransactionIDTaken] != 2 {
		t.Errorf("totals %+v, %v; want 3 settled (105 p), 2 skipped as transaction_id_taken", totals, err)
	}
}

// SettleSites reads every site's readings in one query, a site at a time, and records them a
// batch at a time: each site settles as Compute settles it alone (a site of several assets
// whole, whichever batch it falls in), one whose readings do not cover the event waits until
// final, and one with no reading at all is settled too (skipped) when final.
func TestSettleSitesSettlesEachSiteAsComputeDoes(t *testing.T) {
	ctx := context.Background()
	const org = "org-s"
	store := &settlementstore.Store{Pool: testDB.Pool, BatchSize: 2}
	write(t, org, "a-metered", "meter", "boundary_import_kw", [2]float64{1.8, 2.6}, [2]float64{0.4, 2.9})
	write(t, org, "a-metered", "charger", "charger_consumption_energy_kwh", [2]float64{5, 5}, [2]float64{0, 0})
	write(t, org, "b-assets", "a", "boundary_import_kw", [2]float64{1, 2}, [2]float64{0.2, 2.4})
	write(t, org, "b-assets", "b", "battery_inverter_import_kw", [2]float64{0.8, 0.6}, [2]float64{0.2, 0.5})
	write(t, org, "c-turned-up", "meter", "boundary_import_kw", [2]float64{1, 1}, [2]float64{1.5, 1.2})
	// History only: nothing of the event's own half-hours yet.
	if _, err := testDB.Pool.Exec(ctx, `INSERT INTO readings (organisation, site_id, asset_id, label, start_at, end_at, value)
		SELECT $1, 'd-late', 'meter', 'boundary_import_kw', d + interval '17 hours 30 minutes' + h * interval '30 minutes',
			d + interval '18 hours' + h * interval '30 minutes', 1
		FROM generate_series('2026-11-03'::timestamptz, '2026-11-16', interval '1 day') AS d, generate_series(0, 1) AS h
		WHERE extract(isodow FROM d) < 6`, org); err != nil {
		t.Fatal(err)
	}
	sites := []settlementstore.Site{
		{Source: settlementstore.Source{SiteID: "e-silent"}},
		{Source: settlementstore.Source{SiteID: "d-late"}},
		{Source: settlementstore.Source{SiteID: "c-turned-up"}},
		{Source: settlementstore.Source{SiteID: "b-assets"}},
		{Source: settlementstore.Source{SiteID: "a-metered", BoundaryAssetIDs: []string{"meter"}}},
		{Source: settlementstore.Source{SiteID: "b-assets"}}, // named twice: settled once
	}
	want := map[string]settlement.Result{}
	for _, s := range sites {
		res, err := store.Compute(ctx, org, "ev", rules, s)
		if err != nil {
			t.Fatal(err)
		}
		want[s.SiteID] = res
	}
	if want["a-metered"].CreditPence != 35 || want["b-assets"].CreditPence != 35 ||
		want["d-late"].CoveredSeconds != 0 || want["e-silent"].Reason != settlement.InsufficientHistory {
		t.Fatalf("the sites are not what the test means: %+v", want)
	}
	ev := settlementstore.EventOf("ev", rules)
	check := func(final bool, wantPending int, wantSites ...string) {
		t.Helper()
		pending, err := store.SettleSites(ctx, org, ev, rules, sites, final)
		if err != nil || pending != wantPending {
			t.Fatalf("final %v: %d pending, %v; want %d pending", final, pending, err, wantPending)
		}
		got, err := store.OfEvent(ctx, org, "ev")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(wantSites) {
			t.Fatalf("final %v: settled %v, want %v", final, got, wantSites)
		}
		for _, site := range wantSites {
			g, w := got[site], want[site]
			if g.Status != w.Status || g.Reason != w.Reason || g.FlexWh != w.FlexWh || g.CreditPence != w.CreditPence ||
				len(g.HalfHours) != len(w.HalfHours) {
				t.Errorf("final %v: %s settled as %+v, Compute says %+v", final, site, g, w)
			}
		}
	}
	check(false, 2, "a-metered", "b-assets", "c-turned-up")
	check(true, 0, "a-metered", "b-assets", "c-turned-up", "d-late", "e-silent")
}

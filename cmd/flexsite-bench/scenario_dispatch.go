package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/probe"
)

// Dispatch (issue 35): a flex event over S enrolled sites with one charger each, every site
// consenting to dispatch, timed from the FlexEvent's creation to each of its S
// dispatch.requested notifications reaching a local receiver; against the notification
// latency of the same run (an asset write → its site.eligibility_changed at a receiver, the
// notifications scenario's measure). Rounds alternate A B B A A B B A (docs/performance.md):
// A a new flex event over the S sites (each round its own market, which its DispatchEvents
// name), B a batch of notification samples on fresh households. Target: the dispatches' p99 ≤
// 2 × the notifications' p99.
//
// Beside each A, alternating (A R R A A R R A), a round R of the raw sender (rawSender): the
// same rows inserted in one transaction, the same bodies signed and posted over as many
// connections to the same receiver. Target: the worst A round's creation → last arrival ≤ 2 ×
// the worst R round's (the medians' ratio is reported beside it).
//
// Then one more round, C: a dispatch round of this namespace's S sites (one organisation's
// burst) and, from the FlexEvent's creation, a batch of notification samples in the
// notification namespace (another organisation). The samples whose change was made before the
// burst's last dispatch.requested arrived are the other organisation's single-change delivery
// during the burst; the B rounds' are the same without it. Target: during ÷ without p99 ≤ 2.

const dispatchScenario = "dispatch"

const dispatchNamespace = "bench-dispatch"

func dispatchSites(quick bool) int {
	if quick {
		return 1000
	}
	return 10000
}

// dispatchReceiver records when each dispatch.requested arrived, by the market its
// DispatchEvent names (one per round).
type dispatchReceiver struct {
	*httptest.Server
	secret string
	mu     sync.Mutex
	at     map[string][]time.Time
	// unverified counts the requests whose signature did not verify.
	unverified int
}

func newDispatchReceiver() *dispatchReceiver {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	r := &dispatchReceiver{secret: "whsec_" + base64.StdEncoding.EncodeToString(key), at: map[string][]time.Time{}}
	wh, err := standardwebhooks.NewWebhook(r.secret)
	if err != nil {
		panic(err)
	}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		// Every delivery is verified, as a receiver does (and as the tests' receivers do).
		if wh.Verify(body, req.Header) != nil {
			r.mu.Lock()
			r.unverified++
			r.mu.Unlock()
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		now := time.Now()
		var ev struct {
			Type string `json:"type"`
			Data struct {
				MarketID string `json:"market_id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &ev)
		if ev.Type == string(flexv1.EventDispatchRequested) {
			r.mu.Lock()
			r.at[ev.Data.MarketID] = append(r.at[ev.Data.MarketID], now)
			r.mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	return r
}

func (r *dispatchReceiver) arrivals(market string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.at[market])
}

func runDispatch(ctx context.Context, b *bench, rep *report) error {
	sites := dispatchSites(b.p.Mode == modeQuick)
	ns := dispatchNamespace
	if err := b.namespace(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	h := newHouseholds(ns, 31)
	spec := householdSpec()
	spec.DispatchMethods = []flexv1.DispatchMethod{flexv1.DispatchMethod(flexv1.PropositionLimitedPause)}
	created := time.Now()
	mpans := make([]string, sites)
	for i := range mpans {
		mpans[i] = h.mpan()
	}
	if _, err := runConcurrent(ctx, sites, b.p.Concurrency, func(ctx context.Context, i int) error {
		site := newSite(ns, mpans[i], spec)
		if err := b.c.Create(ctx, site); err != nil {
			return err
		}
		if err := b.c.Create(ctx, newAsset(ns, site.Name, chargerID(mpans[i]), chargerSpec())); err != nil {
			return err
		}
		return b.c.Create(ctx, newEnrolment(ns, site.Name))
	}); err != nil {
		return err
	}
	if err := probe.Retry(ctx, b.p.Settle, 200*time.Millisecond, func() error {
		list := &flexv1.EnrolmentList{}
		if err := b.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		active := 0
		for i := range list.Items {
			if list.Items[i].Status.Phase == flexv1.EnrolmentActive {
				active++
			}
		}
		if active < sites {
			time.Sleep(2 * time.Second)
			return fmt.Errorf("%d of %d enrolments active", active, sites)
		}
		return nil
	}); err != nil {
		return err
	}
	logf("dispatch: %d enrolled households with a consenting charger in %s", sites, time.Since(created).Round(time.Second))

	rcv := newDispatchReceiver()
	defer rcv.Close()
	if err := b.subscribeTo(ctx, ns, "bench-dispatch", rcv.URL, rcv.secret,
		[]flexv1.EventType{flexv1.EventDispatchRequested}); err != nil {
		return err
	}
	// The notification side: fresh households in the namespace the bench watches, a receiver
	// of their eligibility changes.
	const rounds = 4
	k := max(b.p.ConvergenceSamples/4, 10)
	notifyNS := convergenceNamespace
	if err := b.namespace(ctx, notifyNS); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	nh := newHouseholds(notifyNS, 37)
	batches := make([][]string, rounds+1) // the last for round C
	var all []string
	for i := range batches {
		for range k {
			batches[i] = append(batches[i], nh.mpan())
		}
		all = append(all, batches[i]...)
	}
	if _, err := runConcurrent(ctx, len(all), b.p.Concurrency, func(ctx context.Context, i int) error {
		site := newSite(notifyNS, all[i], householdSpec())
		if err := b.c.Create(ctx, site); err != nil {
			return err
		}
		return b.c.Create(ctx, newAsset(notifyNS, site.Name, chargerID(all[i]), chargerSpec()))
	}); err != nil {
		return err
	}
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return err
	}
	healthy := newBenchReceiver(false)
	defer healthy.Close()
	if err := b.subscribe(ctx, notifyNS, "bench-dispatch-notify", healthy); err != nil {
		return err
	}

	var dispatched, notified []time.Duration
	var perRound, issuedIn []time.Duration // each round's last dispatch delivered; all issued
	var rawRounds []time.Duration          // each raw round's last arrival
	var breakdown []dispatchStages
	dispatchRound, notifyRound := 0, 0
	raw, err := b.newRawSender(ctx, rcv)
	if err != nil {
		return fmt.Errorf("the raw sender's tables: %w", err)
	}
	defer raw.drop(ctx)
	// R, the raw sender, beside each A: A R, R A, A R, R A (each R sends again the dispatches
	// of the dispatch round last done), so that the machine's drift falls on both sides.
	for _, side := range []byte("ARBBRAARBBRA") {
		switch side {
		case 'B':
			ph, err := b.notifyPhase(ctx, notifyNS, batches[notifyRound], healthy)
			if err != nil {
				return fmt.Errorf("notification round %d: %w", notifyRound+1, err)
			}
			notifyRound++
			notified = append(notified, ph.deliver...)
			fan99, fanned := ph.stagesAfter.quantile(ph.stagesBefore, "fanned_out", 0.99)
			logf("dispatch: notification round %d (no burst), p99 ms: change -> delivered %.1f, -> event recorded %.1f, "+
				"event recorded -> receiver %.1f (of it fanned out %.1f over %.0f events)", notifyRound,
				ms(percentile(ph.deliver, 99)), ms(percentile(ph.recorded, 99)), ms(percentile(ph.outbox, 99)), ms(fan99), fanned)
			continue
		case 'R':
			took, err := raw.round(ctx, ns, fmt.Sprintf("bench-dispatch-%d", dispatchRound),
				fmt.Sprintf("bench-raw-%d", len(rawRounds)+1), sites)
			if err != nil {
				return fmt.Errorf("the raw sender's round %d: %w", len(rawRounds)+1, err)
			}
			logf("dispatch: raw sender round %d (round %d's %d dispatches and bodies): all delivered in %v",
				len(rawRounds)+1, dispatchRound, sites, took.Round(time.Millisecond))
			rawRounds = append(rawRounds, took)
			continue
		}
		dispatchRound++
		lat, issued, stages, err := b.dispatchRound(ctx, ns, dispatchRound, sites, rcv, nil)
		if err != nil {
			return fmt.Errorf("dispatch round %d: %w", dispatchRound, err)
		}
		logf("dispatch: %s", stages)
		breakdown = append(breakdown, stages)
		issuedIn = append(issuedIn, issued)
		dispatched = append(dispatched, lat...)
		perRound = append(perRound, slices.Max(lat))
	}
	during, burst, err := b.notifyBesideBurst(ctx, ns, notifyNS, dispatchRound+1, sites, batches[rounds], rcv, healthy)
	if err != nil {
		return fmt.Errorf("another organisation's changes during a burst: %w", err)
	}
	if err := b.profileDispatch(ctx, ns, dispatchRound+2, sites, rcv); err != nil {
		return err
	}
	rcv.mu.Lock()
	unverified := rcv.unverified
	rcv.mu.Unlock()
	d99, n99 := ms(percentile(dispatched, 99)), ms(percentile(notified, 99))
	o99 := ms(percentile(during, 99))
	logf("dispatch: another organisation's change -> delivery during a %d-dispatch burst (%v) p50 %.1f ms, p99 %.1f ms "+
		"(%d samples), without it p99 %.1f ms; ratio %.2f", sites, burst.Round(time.Millisecond), ms(percentile(during, 50)), o99,
		len(during), n99, ratio(o99, n99))
	worst, worstRaw := ms(slices.Max(perRound)), ms(slices.Max(rawRounds))
	mid, midRaw := ms(median(perRound)), ms(median(rawRounds))
	logf("dispatch: all delivered %v; the raw sender (%d dispatch rows and their bodies inserted in one transaction, "+
		"signed and posted over %d connections) %v; worst ÷ worst %.2f, median ÷ median %.2f; unverified requests %d",
		perRound, sites, rawWorkers, rawRounds, ratio(worst, worstRaw), ratio(mid, midRaw), unverified)
	logf("dispatch: %d sites, creation -> all issued %v; -> dispatch.requested delivered p50 %.1f ms, p99 %.1f ms (all delivered: %v); "+
		"notification p99 %.1f ms (%d samples); ratio %.2f",
		sites, issuedIn, ms(percentile(dispatched, 50)), d99, perRound, n99, len(notified), ratio(d99, n99))
	rep.add(dispatchScenario, "sites", float64(sites), unitCount)
	rep.detail("dispatch_rounds", breakdown)
	rep.add(dispatchScenario, "creation_to_dispatch_delivered_p50_ms", ms(percentile(dispatched, 50)), unitMS)
	rep.add(dispatchScenario, "creation_to_dispatch_delivered_p99_ms", d99, unitMS)
	rep.add(dispatchScenario, "creation_to_all_delivered_max_ms", ms(slices.Max(perRound)), unitMS)
	rep.add(dispatchScenario, "creation_to_all_issued_max_ms", ms(slices.Max(issuedIn)), unitMS)
	rep.add(dispatchScenario, "notification_p99_ms", n99, unitMS)
	rep.add(dispatchScenario, "creation_to_all_delivered_median_ms", mid, unitMS)
	rep.add(dispatchScenario, "raw_sender_all_delivered_ms", worstRaw, unitMS)
	rep.add(dispatchScenario, "raw_sender_all_delivered_median_ms", midRaw, unitMS)
	rep.detail("dispatch_raw_rounds_ms", msList(rawRounds))
	rep.add(dispatchScenario, "unverified_requests", float64(unverified), unitCount)
	rep.addTarget(dispatchScenario, "all_delivered_vs_raw_sender_ratio", ratio(worst, worstRaw), unitRatio, target{"<=", 2})
	rep.add(dispatchScenario, "all_delivered_vs_raw_sender_median_ratio", ratio(mid, midRaw), unitRatio)
	// Reported only: a burst's p99 over one change's p99 grows with the burst's size by
	// construction; the burst is judged against the raw sender above, one change by
	// notifications.delivery_vs_convergence_p99_ratio.
	rep.add(dispatchScenario, "dispatch_vs_notification_p99_ratio", ratio(d99, n99), unitRatio)
	rep.add(dispatchScenario, "other_org_samples_during_burst", float64(len(during)), unitCount)
	rep.add(dispatchScenario, "other_org_change_to_delivery_during_burst_p99_ms", o99, unitMS)
	rep.addTarget(dispatchScenario, "other_org_during_vs_without_burst_p99_ratio", ratio(o99, n99), unitRatio, target{"<=", 2})
	return nil
}

// dispatchProfileSeconds is how long the manager's CPU profile of a dispatch round runs (a
// quick round takes under a second; the rest is the manager idle).
const dispatchProfileSeconds = 2

// profileDispatch runs one more dispatch round, outside every figure, while the manager's CPU
// profile is taken, and saves it as cpu-dispatch.pb.gz beside the manager's log.
func (b *bench) profileDispatch(ctx context.Context, ns string, round, sites int, rcv *dispatchReceiver) error {
	path := filepath.Join(filepath.Dir(b.mgrCfg.logPath), "cpu-dispatch.pb.gz")
	errc := make(chan error, 1)
	go func() {
		errc <- saveURL(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", b.mgr.pprofURL, dispatchProfileSeconds), path)
	}()
	_, _, stages, err := b.dispatchRound(ctx, ns, round, sites, rcv, nil)
	if pErr := <-errc; err == nil {
		err = pErr
	}
	if err != nil {
		return fmt.Errorf("the profiled dispatch round: %w", err)
	}
	logf("dispatch: profiled %s; the manager's CPU profile: %s", stages, path)
	return nil
}

// notifyBesideBurst runs round C (see above): a dispatch round over ns's sites and, once its
// FlexEvent is created, notification samples on mpans in notifyNS. It answers the delivery
// latencies of the samples whose change was made before the burst's last dispatch arrived, and
// the burst's span (creation to its last arrival).
func (b *bench) notifyBesideBurst(ctx context.Context, ns, notifyNS string, round, sites int, mpans []string,
	rcv *dispatchReceiver, healthy *benchReceiver) ([]time.Duration, time.Duration, error) {
	created := make(chan time.Time, 1)
	burstErr := make(chan error, 1)
	go func() {
		_, _, _, err := b.dispatchRound(ctx, ns, round, sites, rcv, func(at time.Time) { created <- at })
		burstErr <- err
	}()
	var start time.Time
	select {
	case start = <-created:
	case err := <-burstErr:
		return nil, 0, err
	}
	horizon := b.sampleHorizon(ctx)
	ph, err := b.notifyPhase(ctx, notifyNS, mpans, healthy)
	if bErr := <-burstErr; err == nil {
		err = bErr
	}
	if err != nil {
		return nil, 0, err
	}
	end := slices.MaxFunc(rcv.arrivals(fmt.Sprintf("bench-round-%d", round)), time.Time.Compare)
	held := horizon.finish()
	var during, recorded, outbox []time.Duration
	for i, d := range ph.deliver {
		if !ph.started[i].After(end) {
			during = append(during, d)
			recorded, outbox = append(recorded, ph.recorded[i]), append(outbox, ph.outbox[i])
		}
	}
	// Where the other organisation's time went (reported only): its side (change -> event
	// recorded), the outbox's (-> the receiver), and of that the fan-out (the horizon's wait:
	// the dispatches' own events come fanned out, so these are the other organisation's).
	fan50, _ := ph.stagesAfter.quantile(ph.stagesBefore, "fanned_out", 0.50)
	fan99, fanned := ph.stagesAfter.quantile(ph.stagesBefore, "fanned_out", 0.99)
	logf("dispatch: another organisation during the burst, p50/p99 ms: change -> event recorded %.1f/%.1f, "+
		"event recorded -> receiver %.1f/%.1f (of it fanned out, the horizon's wait, %.1f/%.1f over %.0f events); "+
		"the horizon's oldest write transaction: %s",
		ms(percentile(recorded, 50)), ms(percentile(recorded, 99)), ms(percentile(outbox, 50)), ms(percentile(outbox, 99)),
		ms(fan50), ms(fan99), fanned, held)
	if len(during) == 0 {
		return nil, 0, fmt.Errorf("none of %d changes was made before the burst's last delivery (%v after its creation)",
			len(ph.deliver), end.Sub(start))
	}
	return during, end.Sub(start), nil
}

// dispatchRound creates a flex event over the namespace's enrolled sites, starting within
// the next hours (its dispatches are issued at once), and times each of its dispatches from
// the creation to its arrival at the receiver; issued is how long until the FlexEvent's status
// counted them all issued. onCreated (when not nil) is told the creation's time as soon as it
// is made.
func (b *bench) dispatchRound(ctx context.Context, ns string, round, sites int, rcv *dispatchReceiver, onCreated func(time.Time)) (
	latencies []time.Duration, issued time.Duration, stages dispatchStages, err error) {
	market := fmt.Sprintf("bench-round-%d", round)
	start := time.Now().UTC().Truncate(30 * time.Minute).Add(2 * time.Hour)
	ev := &flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("bench-dispatch-%d", round)},
		Spec: flexv1.FlexEventSpec{Proposition: flexv1.PropositionLimitedPause, StartAt: metav1.NewTime(start),
			EndAt: metav1.NewTime(start.Add(time.Hour)), Direction: flexv1.FlexTurnDown, RatePencePerKWh: "10", Market: market}}
	stagesBefore, _, err := b.stageSnapshot(ctx)
	if err != nil {
		return nil, 0, stages, err
	}
	t0 := time.Now()
	if err := b.c.Create(ctx, ev); err != nil {
		return nil, 0, stages, err
	}
	if onCreated != nil {
		onCreated(t0)
	}
	// When the status first counts every dispatch issued: issuance's share of the latency
	// (the status is written in the reconcile that issued them, after their commit).
	if err := func() error {
		for {
			if err := b.c.Get(ctx, client.ObjectKeyFromObject(ev), ev); err != nil {
				return err
			}
			if d := ev.Status.Dispatches; d != nil && d.Issued >= int32(sites) {
				issued = time.Since(t0)
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}(); err != nil {
		return nil, 0, stages, err
	}
	var got []time.Time
	if err := probe.Retry(ctx, b.p.Settle, 200*time.Millisecond, func() error {
		if got = rcv.arrivals(market); len(got) < sites {
			return fmt.Errorf("%d of %d dispatch.requested delivered", len(got), sites)
		}
		return nil
	}); err != nil {
		return nil, 0, stages, err
	}
	latencies = make([]time.Duration, len(got))
	for i, at := range got {
		latencies[i] = at.Sub(t0)
	}
	// The last outcome is recorded just after the last arrival: wait for it, then read.
	if err := probe.Retry(ctx, b.p.Settle, 50*time.Millisecond, func() error {
		var pending int
		if err := b.db.QueryRow(ctx, `SELECT count(*) FROM outbox o JOIN notification_deliveries d ON d.event_seq = o.id
			WHERE o.event_type = $1 AND o.payload->>'market_id' = $2 AND d.state = 'pending'`,
			string(flexv1.EventDispatchRequested), market).Scan(&pending); err != nil {
			return err
		}
		if pending > 0 {
			return fmt.Errorf("%d deliveries not yet recorded", pending)
		}
		return nil
	}); err != nil {
		return nil, 0, stages, err
	}
	stages, err = b.measureDispatchStages(ctx, round, market, t0, issued, got, stagesBefore)
	return latencies, issued, stages, err
}

// rawWorkers is how many connections the raw sender posts over: a subscription's workers
// (internal/delivery's DefaultWorkers), each keeping one connection to the receiver (its
// transport keeps as many idle per host; the receiver speaks HTTP/1.1).
const rawWorkers = 16

// rawSender is the physical limit of a dispatch round's work on this machine, in the issue's
// words "insert the same rows in one transaction, sign and POST the same bodies over the same
// number of connections to the same receiver": the rows the issuance makes durable for those
// dispatches (each dispatch's row and its dispatch.requested event's outbox row, as the
// issuance leaves them), into scratch tables made LIKE dispatches and outbox INCLUDING ALL (the
// same columns, defaults, checks and indexes), in one transaction; then the same bodies signed
// with Standard Webhooks and posted over rawWorkers connections to the same receiver. Nothing
// else: no status history, no delivery rows, no claims, no outcomes recorded.
type rawSender struct {
	b    *bench
	rcv  *dispatchReceiver
	wh   *standardwebhooks.Webhook
	http *http.Client
}

// rawTables are the scratch tables and the real tables they are made like.
var rawTables = [][2]string{{"bench_raw_dispatches", "dispatches"}, {"bench_raw_outbox", "outbox"}}

func (b *bench) newRawSender(ctx context.Context, rcv *dispatchReceiver) (*rawSender, error) {
	for _, t := range rawTables {
		if _, err := b.db.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS %s; CREATE TABLE %[1]s (LIKE %s INCLUDING ALL)`,
			t[0], t[1])); err != nil {
			return nil, err
		}
	}
	wh, err := standardwebhooks.NewWebhook(rcv.secret)
	if err != nil {
		return nil, err
	}
	httpc := rcv.Client()
	httpc.Transport.(*http.Transport).MaxIdleConnsPerHost = rawWorkers
	return &rawSender{b: b, rcv: rcv, wh: wh, http: httpc}, nil
}

func (r *rawSender) drop(ctx context.Context) {
	for _, t := range rawTables {
		_, _ = r.b.db.Exec(ctx, `DROP TABLE IF EXISTS `+t[0])
	}
}

// rawRows are a round's dispatch rows and their events' bodies, as arrays for one statement each.
type rawRows struct {
	eventIDs                                  []uuid.UUID
	flexEvents, sites, assets, markets, props []string
	levels                                    []float64
	froms, tos, stamps, issued                []time.Time
	outboxIDs, types, payloads                []string
	created                                   []time.Time
}

// round sends again the dispatches of the flex event source (its rows read back from the
// tables, untimed), as the flex event name with its own market (so that the receiver counts
// its arrivals apart) and its own ids, and answers the time from the start of the insert to
// the last arrival.
func (r *rawSender) round(ctx context.Context, ns, source, name string, sites int) (time.Duration, error) {
	rows, err := r.b.db.Query(ctx, `SELECT d.site_id, d.asset_id, d.level_kw, d.from_time, d.to_time, d.event_timestamp,
			d.issued_at, coalesce(d.proposition, ''), o.event_type, o.payload::text, o.created_at
		FROM dispatches d JOIN outbox o ON o.organisation = d.organisation AND o.event_id = 'evt_' || d.event_id::text
		WHERE d.organisation = $1 AND d.flex_event = $2 ORDER BY o.id`, ns, source)
	if err != nil {
		return 0, err
	}
	var rr rawRows
	var site, asset, prop, typ, payload string
	var level float64
	var from, to, stamp, issued, created time.Time
	if _, err := pgx.ForEachRow(rows, []any{&site, &asset, &level, &from, &to, &stamp, &issued, &prop, &typ, &payload, &created},
		func() error {
			id := uuid.New()
			var body map[string]any
			if err := json.Unmarshal([]byte(payload), &body); err != nil {
				return err
			}
			body["market_id"], body["event_id"] = name, id.String()
			b, err := json.Marshal(body)
			if err != nil {
				return err
			}
			rr.eventIDs, rr.flexEvents, rr.sites, rr.assets = append(rr.eventIDs, id), append(rr.flexEvents, name),
				append(rr.sites, site), append(rr.assets, asset)
			rr.markets, rr.props, rr.levels = append(rr.markets, name), append(rr.props, prop), append(rr.levels, level)
			rr.froms, rr.tos, rr.stamps, rr.issued = append(rr.froms, from), append(rr.tos, to), append(rr.stamps, stamp),
				append(rr.issued, issued)
			rr.outboxIDs, rr.types, rr.payloads = append(rr.outboxIDs, "evt_"+id.String()), append(rr.types, typ),
				append(rr.payloads, string(b))
			rr.created = append(rr.created, created)
			return nil
		}); err != nil {
		return 0, err
	}
	if len(rr.eventIDs) < sites {
		return 0, fmt.Errorf("%d of %d dispatches of %s found", len(rr.eventIDs), sites, source)
	}
	t0 := time.Now()
	if err := pgx.BeginFunc(ctx, r.b.db, func(q pgx.Tx) error {
		if _, err := q.Exec(ctx, `INSERT INTO bench_raw_dispatches (organisation, event_id, flex_event, site_id, asset_id,
				market_id, level_kw, from_time, to_time, event_timestamp, issued_at, updated_at, proposition)
			SELECT $1, event_id, flex_event, site_id, asset_id, market_id, level_kw, from_time, to_time, event_timestamp,
				issued_at, issued_at, nullif(proposition, '')
			FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[], $8::timestamptz[],
				$9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::text[])
				AS i(event_id, flex_event, site_id, asset_id, market_id, level_kw, from_time, to_time, event_timestamp,
					issued_at, proposition)`,
			ns, rr.eventIDs, rr.flexEvents, rr.sites, rr.assets, rr.markets, rr.levels, rr.froms, rr.tos, rr.stamps,
			rr.issued, rr.props); err != nil {
			return err
		}
		// As the issuance leaves them: written fanned out (its rows carry fanned_out_at).
		_, err := q.Exec(ctx, `INSERT INTO bench_raw_outbox (organisation, site_id, event_type, event_id, payload, created_at,
				fanned_out_at)
			SELECT $1, site_id, event_type, event_id, payload::jsonb, created_at, clock_timestamp()
			FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[])
				AS e(site_id, event_type, event_id, payload, created_at)`,
			ns, rr.sites, rr.types, rr.outboxIDs, rr.payloads, rr.created)
		return err
	}); err != nil {
		return 0, err
	}
	if _, err := runConcurrent(ctx, len(rr.outboxIDs), rawWorkers, func(ctx context.Context, i int) error {
		return r.post(ctx, rr.outboxIDs[i], rr.payloads[i])
	}); err != nil {
		return 0, err
	}
	got := r.rcv.arrivals(name)
	if len(got) < len(rr.outboxIDs) {
		return 0, fmt.Errorf("%d of %d raw posts arrived", len(got), len(rr.outboxIDs))
	}
	return slices.MaxFunc(got, time.Time.Compare).Sub(t0), nil
}

// post signs and posts one event as the deliverer does (internal/events.Body: type, id,
// timestamp, data; the Standard Webhooks headers).
func (r *rawSender) post(ctx context.Context, id, payload string) error {
	body, err := json.Marshal(struct {
		Type      flexv1.EventType `json:"type"`
		ID        string           `json:"id"`
		Timestamp string           `json:"timestamp"`
		Data      json.RawMessage  `json:"data"`
	}{flexv1.EventDispatchRequested, id, time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"),
		json.RawMessage(payload)})
	if err != nil {
		return err
	}
	now := time.Now()
	sig, err := r.wh.Sign(id, now, body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.rcv.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set(standardwebhooks.HeaderWebhookID, id)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	resp, err := r.http.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the receiver answered %d", resp.StatusCode)
	}
	return nil
}

func msList(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = ms(d)
	}
	return out
}

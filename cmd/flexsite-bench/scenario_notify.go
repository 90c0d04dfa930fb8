package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/probe"
)

// Scenario 6: push notifications. Every household's eligibility is broken by one asset
// write (the convergence scenario's model_changed), and the bench times, per site, the write
// -> Site.status (convergence) and the write -> the receiver's site.eligibility_changed
// (delivery), in three phases of fresh households:
//
//  1. no subscription: the status writes per changed site without notifications;
//  2. one subscription whose receiver hangs (each attempt times out): the same writes, now
//     with events recorded; the difference is the outbox's own API-server write overhead
//     (target 0: the events are rows in PostgreSQL, no object's status carries them);
//  3. a healthy receiver alone: delivery latency and deliveries/s;
//  4. a healthy receiver beside the hanging one: the healthy receiver's latency again; the
//     ratio to phase 3 says whether a dead receiver slows a healthy one (target about 1).
//
// Receivers are httptest TLS servers on loopback; the manager trusts their certificate
// (--notification-ca-file) and may deliver to loopback (--notification-allow-cidrs).

// notifyCAFile writes httptest's TLS certificate (every httptest TLS server uses the same) for
// the manager to trust.
func notifyCAFile(dir string) (string, error) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	path := filepath.Join(dir, "receiver-ca.pem")
	return path, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600)
}

// benchReceiver records when each site's eligibility event arrived.
type benchReceiver struct {
	*httptest.Server
	secret string
	mu     sync.Mutex
	at     map[string]time.Time // site id -> first site.eligibility_changed seen after armed
	// stamped is that event's own timestamp: when the controller recorded it in the outbox.
	stamped map[string]time.Time
	armed   map[string]bool
	count   int
	stop    chan struct{}
}

// Close releases the hanging requests, then stops the server.
func (r *benchReceiver) Close() {
	close(r.stop)
	r.Server.Close()
}

func newBenchReceiver(hang bool) *benchReceiver {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	r := &benchReceiver{secret: "whsec_" + base64.StdEncoding.EncodeToString(key), at: map[string]time.Time{},
		stamped: map[string]time.Time{}, armed: map[string]bool{}, stop: make(chan struct{})}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if hang {
			select {
			case <-req.Context().Done():
			case <-r.stop:
			}
			return
		}
		now := time.Now()
		body, _ := io.ReadAll(req.Body)
		var ev struct {
			Type      string    `json:"type"`
			Timestamp time.Time `json:"timestamp"`
			Data      struct {
				SiteID string `json:"site_id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &ev)
		r.mu.Lock()
		r.count++
		if ev.Type == string(flexv1.EventSiteEligibilityChanged) && r.armed[ev.Data.SiteID] {
			if _, seen := r.at[ev.Data.SiteID]; !seen {
				r.at[ev.Data.SiteID] = now
				r.stamped[ev.Data.SiteID] = ev.Timestamp
			}
		}
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	return r
}

func (r *benchReceiver) arm(siteID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.armed[siteID] = true
}

func (r *benchReceiver) arrived(siteID string) (at, stamped time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok = r.at[siteID]
	return at, r.stamped[siteID], ok
}

// subscribe creates a Secret and a Subscription to the receiver and waits until the
// deliverer has seen it (Ready).
func (b *bench) subscribe(ctx context.Context, ns, name string, r *benchReceiver) error {
	return b.subscribeTo(ctx, ns, name, r.URL, r.secret,
		[]flexv1.EventType{flexv1.EventSiteEligibilityChanged, flexv1.EventAssetChanged})
}

// subscribeTo creates a Secret and a Subscription of the given types to url, and waits until
// the deliverer has seen it (Ready).
func (b *bench) subscribeTo(ctx context.Context, ns, name, url, secret string, types []flexv1.EventType) error {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string][]byte{"secret": []byte(secret)}}
	if err := b.c.Create(ctx, sec); err != nil {
		return err
	}
	sub := &flexv1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flexv1.SubscriptionSpec{URL: url, SecretRef: flexv1.SecretKeyReference{Name: name}, Events: types}}
	if err := b.c.Create(ctx, sub); err != nil {
		return err
	}
	return probe.Retry(ctx, time.Minute, 200*time.Millisecond, func() error {
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(sub), sub); err != nil {
			return err
		}
		if meta.FindStatusCondition(sub.Status.Conditions, flexv1.ReadyCondition) == nil {
			return fmt.Errorf("subscription %s not seen by the deliverer yet", name)
		}
		return nil
	})
}

// notifyPhase is one phase's figures.
type notifyPhase struct {
	converge, deliver []time.Duration
	// started is when each delivered sample's change was made (deliver's order).
	started      []time.Time
	statusWrites float64
	elapsed      time.Duration
	// recorded is change -> the event's own timestamp, outbox its timestamp -> the receiver.
	recorded, outbox []time.Duration
	// The deliverer's stage histograms and connections before and after the phase.
	stagesBefore, stagesAfter stageBuckets
	connsBefore, connsAfter   connCounts
}

// runNotifications runs the four phases (see above).
func runNotifications(ctx context.Context, b *bench, rep *report) error {
	ns := convergenceNamespace // the bench watches its Sites and Assets
	if err := b.namespace(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	h := newHouseholds(ns, 29)
	k := max(b.p.ConvergenceSamples/2, 10)
	mpans := make([][]string, 4)
	for ph := range mpans {
		for range k {
			mpans[ph] = append(mpans[ph], h.mpan())
		}
	}
	all := slices.Concat(mpans...)
	_, err := runConcurrent(ctx, len(all), b.p.Concurrency, func(ctx context.Context, i int) error {
		site := newSite(ns, all[i], householdSpec())
		if err := b.c.Create(ctx, site); err != nil {
			return err
		}
		return b.c.Create(ctx, newAsset(ns, site.Name, chargerID(all[i]), chargerSpec()))
	})
	if err != nil {
		return err
	}
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return err
	}
	dead, healthy := newBenchReceiver(true), newBenchReceiver(false)
	defer dead.Close()
	defer healthy.Close()

	phases := make([]notifyPhase, 4)
	for ph := range phases {
		switch ph {
		case 1:
			err = b.subscribe(ctx, ns, "bench-dead", dead)
		case 2:
			// The healthy receiver alone: the hanging one's subscription goes.
			if err = b.c.Delete(ctx, &flexv1.Subscription{ObjectMeta: objectMeta(ns, "bench-dead")}); err == nil {
				err = b.subscribe(ctx, ns, "bench-healthy", healthy)
			}
		case 3:
			err = b.subscribe(ctx, ns, "bench-dead-2", dead)
		}
		if err != nil {
			return err
		}
		var rcv *benchReceiver
		if ph >= 2 {
			rcv = healthy
		}
		if phases[ph], err = b.notifyPhase(ctx, ns, mpans[ph], rcv); err != nil {
			return fmt.Errorf("phase %d: %w", ph+1, err)
		}
	}
	reportNotifications(rep, k, phases)
	for _, name := range []string{"bench-healthy", "bench-dead-2"} {
		_ = b.c.Delete(ctx, &flexv1.Subscription{ObjectMeta: objectMeta(ns, name)})
	}
	return runBacklog(ctx, b, rep)
}

// notifyPhase breaks the eligibility of each household, one at a time at the bench's
// concurrency, and times convergence and (with a receiver) delivery; it counts the status
// writes of the outbox kinds while the controllers work.
func (b *bench) notifyPhase(ctx context.Context, ns string, mpans []string, rcv *benchReceiver) (notifyPhase, error) {
	var out notifyPhase
	var mu sync.Mutex
	before, err := b.requests.snapshot(ctx)
	if err != nil {
		return out, err
	}
	if out.stagesBefore, out.connsBefore, err = b.stageSnapshot(ctx); err != nil {
		return out, err
	}
	start := time.Now()
	_, err = runConcurrent(ctx, len(mpans), b.p.Concurrency, func(ctx context.Context, i int) error {
		mpan := mpans[i]
		site := &flexv1.Site{}
		if err := b.watch.cache.Get(ctx, siteKeyOf(ns, mpan), site); err != nil {
			return err
		}
		siteID := site.Labels[flexv1.IDLabel]
		if rcv != nil {
			rcv.arm(siteID)
		}
		convCh := b.watch.sites.expect(siteKeyOf(ns, mpan), func(o client.Object) bool { return eligibleForNothing(o.(*flexv1.Site)) })
		t0 := time.Now()
		if err := b.c.Patch(ctx, &flexv1.Asset{ObjectMeta: objectMeta(ns, identity.AssetName(chargerID(mpan)))},
			mergePatch(`{"spec":{"model":%q}}`, "legacy_charger")); err != nil {
			return err
		}
		conv, err := await(ctx, convCh, t0, sampleTimeout, "status showing the new eligibility")
		if err != nil {
			return err
		}
		var deliv, recorded, outbox time.Duration
		if rcv != nil {
			if err := probe.Retry(ctx, sampleTimeout, 200*time.Millisecond, func() error {
				at, stamped, ok := rcv.arrived(siteID)
				if !ok {
					return fmt.Errorf("no site.eligibility_changed for site %s yet", siteID)
				}
				deliv, recorded, outbox = at.Sub(t0), stamped.Sub(t0), at.Sub(stamped)
				return nil
			}); err != nil {
				return err
			}
		}
		mu.Lock()
		out.converge = append(out.converge, conv)
		if rcv != nil {
			out.deliver, out.started = append(out.deliver, deliv), append(out.started, t0)
			out.recorded, out.outbox = append(out.recorded, recorded), append(out.outbox, outbox)
		}
		mu.Unlock()
		return nil
	})
	if err != nil {
		return out, err
	}
	out.elapsed = time.Since(start)
	if out.stagesAfter, out.connsAfter, err = b.stageSnapshot(ctx); err != nil {
		return out, err
	}
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return out, err
	}
	after, err := b.requests.snapshot(ctx)
	if err != nil {
		return out, err
	}
	out.statusWrites = after.minus(before).where(func(k requestKey) bool {
		return isWrite(k) && k.Subresource == "status" && slices.Contains([]string{"sites", "assets", "enrolments"}, k.Resource)
	}).total()
	return out, nil
}

func reportNotifications(rep *report, k int, ph []notifyPhase) {
	n := float64(k)
	base, withOutbox := ph[0].statusWrites/n, ph[1].statusWrites/n
	conv99 := ms(percentile(slices.Concat(ph[2].converge, ph[3].converge), 99))
	alone99, beside99 := ms(percentile(ph[2].deliver, 99)), ms(percentile(ph[3].deliver, 99))
	alone50 := ms(percentile(ph[2].deliver, 50))
	perSec := float64(len(ph[2].deliver)) / ph[2].elapsed.Seconds()
	logf("notifications: %d changes per phase; status writes per changed site %.2f without, %.2f with an outbox; "+
		"change -> delivery p50 %.1f ms, p99 %.1f ms (convergence p99 %.1f ms); beside a dead receiver p99 %.1f ms; %.1f deliveries/s",
		k, base, withOutbox, alone50, alone99, conv99, beside99, perSec)
	rep.add("notifications", "changes_per_phase", n, unitCount)
	rep.add("notifications", "status_writes_per_changed_site_without", base, unitCount)
	rep.add("notifications", "status_writes_per_changed_site_with_outbox", withOutbox, unitCount)
	rep.addTarget("notifications", "outbox_extra_writes_per_changed_site", withOutbox-base, unitCount, target{"<=", 0})
	rep.add("notifications", "deliveries_per_second", perSec, unitPerSec)
	rep.add("notifications", "change_to_delivery_p50_ms", alone50, unitMS)
	rep.add("notifications", "change_to_delivery_p99_ms", alone99, unitMS)
	rep.add("notifications", "convergence_p99_ms", conv99, unitMS)
	// Issue 50's single-change figure: change -> delivery p99 ÷ change -> status written p99 (the
	// controller's own reaction, as the bench's watch sees it), no hold-back between them.
	rep.addTarget("notifications", "delivery_vs_convergence_p99_ratio", ratio(alone99, conv99), unitRatio, target{"<=", 2})
	rep.add("notifications", "change_to_delivery_beside_dead_p99_ms", beside99, unitMS)
	rep.addTarget("notifications", "beside_dead_vs_alone_p99_ratio", ratio(beside99, alone99), unitRatio, target{"<=", 1.5})
	reportNotifyStages(rep, ph[2])
}

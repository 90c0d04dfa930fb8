package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/probe"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// The notification backlog (the one outbox, docs/notifications.md): N credits land on one
// site while its subscription's receiver is down, then the receiver comes back. Every credit's
// rewards.transaction_credited must be delivered, in the order credited, none dropped (the
// status outboxes of earlier versions kept 16). The full run keeps the receiver down for 10
// minutes (the retry schedule's backoff has reached 10 min by then, so the first delivery
// after it may wait that long); the quick run for 20 s (documented in docs/notifications.md).

const backlogCredits = 1000

// backlogReceiver answers 503 while down, and records the transaction ids it accepts.
type backlogReceiver struct {
	*httptest.Server
	secret string
	mu     sync.Mutex
	down   bool
	ids    []string
	last   time.Time
}

func newBacklogReceiver() *backlogReceiver {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	r := &backlogReceiver{secret: "whsec_" + base64.StdEncoding.EncodeToString(key), down: true}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var ev struct {
			Data struct {
				TransactionID string `json:"transaction_id"`
			} `json:"data"`
		}
		_ = json.Unmarshal(body, &ev)
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		r.ids = append(r.ids, ev.Data.TransactionID)
		r.last = time.Now()
		w.WriteHeader(http.StatusNoContent)
	}))
	return r
}

func (r *backlogReceiver) setDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
}

func (r *backlogReceiver) received() ([]string, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids), r.last
}

// runBacklog credits one site backlogCredits times with its receiver down, brings the
// receiver up after the mode's downtime, and reports what arrived.
func runBacklog(ctx context.Context, b *bench, rep *report) error {
	downtime := 10 * time.Minute
	if b.p.Mode == modeQuick {
		downtime = 20 * time.Second
	}
	ns := convergenceNamespace
	if err := b.namespace(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	h := newHouseholds(ns, 31)
	mpan := h.mpan()
	site := newSite(ns, mpan, householdSpec())
	if err := b.c.Create(ctx, site); err != nil {
		return err
	}
	var siteID string
	if err := probe.Retry(ctx, time.Minute, 200*time.Millisecond, func() error {
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(site), site); err != nil {
			return err
		}
		if siteID = site.Labels[flexv1.IDLabel]; siteID == "" {
			return fmt.Errorf("site %s has no id yet", site.Name)
		}
		return nil
	}); err != nil {
		return err
	}
	r := newBacklogReceiver()
	defer r.Close()
	if err := b.subscribeTo(ctx, ns, "bench-backlog", r.URL, r.secret,
		[]flexv1.EventType{flexv1.EventRewardsTransactionCredited}); err != nil {
		return err
	}
	defer func() { _ = b.c.Delete(ctx, &flexv1.Subscription{ObjectMeta: objectMeta(ns, "bench-backlog")}) }()

	credited := make([]string, 0, backlogCredits)
	start := time.Now()
	for i := range backlogCredits {
		id := uuid.NewString()
		if _, _, err := b.rewards.Append(ctx, rewardstore.Site{Namespace: ns, ID: siteID}, flexv1.RewardTransaction{
			ID: id, Type: "goodwill credit", CreditPence: int64(1 + i%100), SettlementDate: "2026-11-01"},
			rewardstore.SourceAPI); err != nil {
			return err
		}
		credited = append(credited, id)
	}
	logf("backlog: %d credits to one site in %s; receiver down for %s", backlogCredits, time.Since(start).Round(time.Millisecond), downtime)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(max(0, downtime-time.Since(start))):
	}
	up := time.Now()
	r.setDown(false)
	// The head's next attempt may be a full backoff step away (10 min in the full run).
	err := probe.Retry(ctx, downtime+30*time.Minute, 200*time.Millisecond, func() error {
		if got, _ := r.received(); len(got) < backlogCredits {
			return fmt.Errorf("%d of %d credits delivered", len(got), backlogCredits)
		}
		return nil
	})
	got, last := r.received()
	inOrder, unique := 1.0, map[string]bool{}
	for _, id := range got {
		unique[id] = true
	}
	// In order: the first arrival of each id follows the credits' order.
	var firsts []string
	seen := map[string]bool{}
	for _, id := range got {
		if !seen[id] {
			seen[id] = true
			firsts = append(firsts, id)
		}
	}
	if !slices.Equal(firsts, credited[:min(len(firsts), len(credited))]) {
		inOrder = 0
	}
	drain := last.Sub(up)
	logf("backlog: %d of %d delivered (%d posts), in order %v, the last %s after the receiver came back",
		len(unique), backlogCredits, len(got), inOrder == 1, drain.Round(time.Millisecond))
	rep.add("notifications", "backlog_credits", backlogCredits, unitCount)
	rep.add("notifications", "backlog_downtime_seconds", downtime.Seconds(), unitSeconds)
	rep.addTarget("notifications", "backlog_delivered", float64(len(unique)), unitCount, target{">=", backlogCredits})
	rep.addTarget("notifications", "backlog_in_order", inOrder, unitCount, target{"==", 1})
	rep.add("notifications", "backlog_drain_after_up_seconds", drain.Seconds(), unitSeconds)
	return err
}

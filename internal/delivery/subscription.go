package delivery

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/metrics"
)

// job is one event to attempt for one subscription.
type job struct {
	site string
	it   item
}

// retryState is an event's failed attempts and when it may be tried again (in memory: a
// restarted manager tries at once; the retry horizon runs from the event's own time).
type retryState struct {
	failed int
	next   time.Time
	// secretWaits counts the waits for a new subscription's signing Secret (not attempts).
	secretWaits int
}

// secretWait is the first wait for a new subscription's signing Secret; each further wait
// doubles it, up to secretWaitMax.
const (
	secretWait    = 25 * time.Millisecond
	secretWaitMax = time.Second
)

// subState is one subscription's workers and delivery state.
type subState struct {
	d      *Deliverer
	key    types.NamespacedName
	cancel context.CancelFunc
	queue  chan job
	// seen is when this deliverer first saw the subscription.
	seen time.Time

	mu       sync.Mutex
	sub      flexv1.Subscription
	inflight map[string]bool
	retries  map[string]*retryState
	// done holds events delivered or dropped whose outbox write the cache may not show yet.
	done map[string]time.Time
	// status is the subscription's delivery state as this deliverer knows it.
	status flexv1.SubscriptionStatus
}

// syncSubscriptions starts workers for new subscriptions and stops those of subscriptions
// that went.
func (d *Deliverer) syncSubscriptions(ctx context.Context, subs []flexv1.Subscription) {
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[types.UID]bool{}
	for i := range subs {
		s := &subs[i]
		seen[s.UID] = true
		st, ok := d.subs[s.UID]
		if !ok {
			wctx, cancel := context.WithCancel(ctx)
			st = &subState{d: d, key: client.ObjectKeyFromObject(s), cancel: cancel, seen: d.Now(),
				queue: make(chan job, d.Workers), inflight: map[string]bool{}, retries: map[string]*retryState{},
				done: map[string]time.Time{}, status: *s.Status.DeepCopy()}
			d.subs[s.UID] = st
			for range d.Workers {
				d.wg.Add(1)
				go func() {
					defer d.wg.Done()
					st.work(wctx)
				}()
			}
		}
		st.mu.Lock()
		st.sub = *s.DeepCopy()
		if st.reportPauseChange(s) {
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				_ = st.writeStatus(ctx)
			}()
		}
		// Forget "done" marks the cache has caught up with (after a minute).
		for id, at := range st.done {
			if time.Since(at) > time.Minute {
				delete(st.done, id)
			}
		}
		st.mu.Unlock()
	}
	for uid, st := range d.subs {
		if !seen[uid] {
			st.cancel()
			delete(d.subs, uid)
		}
	}
}

func (d *Deliverer) stopAll() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for uid, st := range d.subs {
		st.cancel()
		delete(d.subs, uid)
	}
}

func (d *Deliverer) state(sub *flexv1.Subscription) *subState {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.subs[sub.UID]
}

func (st *subState) isDone(id string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	_, ok := st.done[id]
	return ok
}

// reportPauseChange brings the Ready condition in line with spec.paused, and reports a
// subscription first seen (from then on events are recorded for it). It answers whether the
// status needs writing (st.mu held).
func (st *subState) reportPauseChange(s *flexv1.Subscription) bool {
	cur := meta.FindStatusCondition(st.status.Conditions, flexv1.ReadyCondition)
	cond := metav1.Condition{Type: flexv1.ReadyCondition, ObservedGeneration: s.Generation}
	switch {
	case s.Spec.Paused && (cur == nil || cur.Reason != flexv1.ReasonPaused):
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, flexv1.ReasonPaused, "The subscription is paused"
	case !s.Spec.Paused && (cur == nil || cur.Reason == flexv1.ReasonPaused):
		cond.Status, cond.Reason = metav1.ConditionTrue, flexv1.ReasonDelivering
		cond.Message = "Events are recorded for this subscription; none delivered since it was created or resumed"
	default:
		return false
	}
	meta.SetStatusCondition(&st.status.Conditions, cond)
	return true
}

// offer hands a site's head event to the workers unless the site is in flight, its retry is
// not due, or the queue is full (then the next scan offers it again). Never blocks. It
// answers how soon the event's retry falls due (0 when it is not waiting for one).
func (st *subState) offer(site string, it item, now time.Time) time.Duration {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.inflight[site] || st.sub.Spec.Paused {
		return 0
	}
	if r, ok := st.retries[it.ev.ID]; ok && now.Before(r.next) {
		return r.next.Sub(now)
	}
	select {
	case st.queue <- job{site: site, it: it}:
		st.inflight[site] = true
	default:
	}
	return 0
}

// work attempts the jobs of one subscription until ctx ends.
func (st *subState) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case j := <-st.queue:
			st.deliver(ctx, j)
			st.mu.Lock()
			delete(st.inflight, j.site)
			st.mu.Unlock()
			st.d.Kick()
		}
	}
}

// deliver attempts one event and records the outcome.
func (st *subState) deliver(ctx context.Context, j job) {
	d := st.d
	log := ctrl.LoggerFrom(ctx).WithValues("subscription", st.key, "event", j.it.ev.ID, "type", j.it.ev.Type)
	st.mu.Lock()
	sub := st.sub.DeepCopy()
	attempt := 1
	if r, ok := st.retries[j.it.ev.ID]; ok {
		attempt = r.failed + 1
	}
	st.mu.Unlock()

	start := d.Now()
	code, err := 0, error(nil)
	wh, err := d.signer(ctx, sub)
	if apierrors.IsNotFound(err) && st.awaitSecret(j.it.ev.ID, start) {
		return // not made yet: no attempt, the event is offered again in a moment
	}
	if err == nil {
		code, err = d.attempt(ctx, sub, wh, &j.it.ev)
	}
	if ctx.Err() != nil {
		return // stopping: the event stays pending
	}
	latency := d.Now().Sub(start)
	outcome := "delivered"
	done := err == nil
	switch {
	case code == http.StatusGone:
		outcome, done = "gone", true
	case err != nil && d.Schedule.Expired(j.it.ev.Time.Time, d.Now()):
		outcome, done = "dropped", true
		metrics.NotificationsDropped.WithLabelValues(metrics.DropRetryHorizon).Inc()
	case err != nil:
		outcome = "failed"
	}
	metrics.NotificationDeliveries.WithLabelValues(string(j.it.ev.Type), outcome).Inc()

	st.mu.Lock()
	if done {
		delete(st.retries, j.it.ev.ID)
		st.done[j.it.ev.ID] = time.Now()
	} else {
		r := st.retries[j.it.ev.ID]
		if r == nil {
			r = &retryState{}
			st.retries[j.it.ev.ID] = r
		}
		r.failed++
		r.next = d.Now().Add(d.Schedule.Delay(r.failed))
	}
	st.record(j, attempt, start, code, latency, err, outcome)
	st.mu.Unlock()

	if code == http.StatusGone {
		if perr := st.pause(ctx); perr != nil {
			log.Error(perr, "pausing the subscription after 410 Gone")
		}
	}
	if done {
		if serr := d.settle(ctx, j.it, sub.Name); serr != nil && ctx.Err() == nil {
			log.Error(serr, "marking the event delivered")
			st.mu.Lock()
			delete(st.done, j.it.ev.ID) // try again: at least once
			st.mu.Unlock()
		}
	}
	if werr := st.writeStatus(ctx); werr != nil && ctx.Err() == nil {
		log.V(1).Info("writing the subscription's delivery state", "error", werr.Error())
	}
}

// awaitSecret: a subscription's signing Secret may be made a moment after the Subscription
// (the REST API makes it just after, as it is owned by the Subscription), and the first
// event may be due in between. While the subscription is new to this deliverer (SecretGrace),
// a missing Secret is waited for (the event is offered again after 25 ms, doubling to 1 s)
// instead of counted as a failed attempt retried seconds later. It answers whether to wait.
func (st *subState) awaitSecret(id string, now time.Time) bool {
	if now.Sub(st.seen) >= st.d.SecretGrace {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	r := st.retries[id]
	if r == nil {
		r = &retryState{}
		st.retries[id] = r
	}
	r.next = now.Add(min(secretWait<<min(r.secretWaits, 16), secretWaitMax))
	r.secretWaits++
	return true
}

// record updates the in-memory delivery state with one attempt (st.mu held).
func (st *subState) record(j job, attempt int, at time.Time, code int, latency time.Duration, err error, outcome string) {
	s := &st.status
	s.LastDelivery = &flexv1.DeliveryResult{Time: metav1.NewTime(at.UTC().Truncate(time.Second)),
		StatusCode: int32(code), LatencyMillis: latency.Milliseconds()} //nolint:gosec // an HTTP status
	a := flexv1.DeliveryAttempt{EventID: j.it.ev.ID, Type: j.it.ev.Type, Attempt: int32(min(attempt, 1<<30)), //nolint:gosec // bounded
		Time: metav1.NewTime(at.UTC().Truncate(time.Second)), LatencyMillis: latency.Milliseconds(),
		StatusCode: int32(code)} //nolint:gosec // an HTTP status
	if err != nil {
		a.Error = truncate(err.Error(), 256)
	}
	s.RecentDeliveries = append([]flexv1.DeliveryAttempt{a}, s.RecentDeliveries...)
	if len(s.RecentDeliveries) > recentLimit {
		s.RecentDeliveries = s.RecentDeliveries[:recentLimit]
	}
	cond := metav1.Condition{Type: flexv1.ReadyCondition, ObservedGeneration: st.sub.Generation}
	switch outcome {
	case "delivered":
		s.Delivered++
		s.ConsecutiveFailures = 0
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, flexv1.ReasonDelivering, "The last delivery succeeded"
	case "gone":
		s.FailedAttempts++
		s.ConsecutiveFailures++
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, flexv1.ReasonPaused, "The receiver answered 410 Gone: subscription paused"
	default:
		s.FailedAttempts++
		s.ConsecutiveFailures++
		if outcome == "dropped" {
			s.Dropped++
		}
		cond.Status, cond.Reason = metav1.ConditionFalse, flexv1.ReasonDeliveryFailing
		if errors.Is(err, errSigningSecret) {
			cond.Reason = flexv1.ReasonSecretMissing
		}
		cond.Message = "Deliveries fail and are retried: " + a.Error
	}
	meta.SetStatusCondition(&s.Conditions, cond)
}

// writeStatus writes the in-memory delivery state into the subscription's status (one merge
// patch of the fields it owns; the outbox is not touched).
func (st *subState) writeStatus(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur := &flexv1.Subscription{}
		if err := st.d.Client.Get(ctx, st.key, cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		base := cur.DeepCopy()
		st.mu.Lock()
		cur.Status.Conditions = st.status.Conditions
		cur.Status.LastDelivery = st.status.LastDelivery
		cur.Status.ConsecutiveFailures = st.status.ConsecutiveFailures
		cur.Status.Delivered = st.status.Delivered
		cur.Status.FailedAttempts = st.status.FailedAttempts
		cur.Status.Dropped = st.status.Dropped
		cur.Status.RecentDeliveries = st.status.RecentDeliveries
		st.mu.Unlock()
		return st.d.Client.Status().Patch(ctx, cur, client.MergeFrom(base))
	})
}

// pause sets spec.paused after the receiver answered 410 Gone.
func (st *subState) pause(ctx context.Context) error {
	cur := &flexv1.Subscription{}
	if err := st.d.Client.Get(ctx, st.key, cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	if cur.Spec.Paused {
		return nil
	}
	base := cur.DeepCopy()
	cur.Spec.Paused = true
	st.mu.Lock()
	st.sub.Spec.Paused = true
	st.mu.Unlock()
	return st.d.Client.Patch(ctx, cur, client.MergeFrom(base))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

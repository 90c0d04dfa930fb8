package delivery

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/outboxstore"
)

// secretWait is the first wait for a new subscription's signing Secret; each further wait
// doubles it, up to secretWaitMax.
const (
	secretWait    = 25 * time.Millisecond
	secretWaitMax = time.Second
)

// statusEvery bounds how often one subscription's status is written (it is written only when
// it changed, and at most this often).
const statusEvery = 250 * time.Millisecond

// subState is one subscription's workers on this replica.
type subState struct {
	d      *Deliverer
	key    types.NamespacedName
	uid    string
	cancel context.CancelFunc
	// queued signals the workers that queue (under mu) holds deliveries.
	queued chan struct{}
	// settled are the attempted deliveries whose outcomes wait to be recorded (settle).
	settled chan outboxstore.Settled
	// claims asks the claimer to fill the queue.
	claims chan struct{}
	// dirty asks the status writer to write the subscription's status.
	dirty chan struct{}
	// seen is when this deliverer first saw the subscription.
	seen time.Time

	mu  sync.Mutex
	sub flexv1.Subscription
	// queue holds the claimed deliveries no worker has taken yet, in claim order (at most
	// Lookahead beyond the busy workers): a slice, so that an idle subscription holds no room
	// for a deep queue.
	queue []outboxstore.Delivery
	// unposted are the deliveries claimed and not yet posted: queued, or being posted; at most
	// Workers + Lookahead. Those posted whose outcomes wait to be recorded are not counted, so
	// that a claim never waits for a record: at most Workers + Lookahead of them wait in
	// settled, and a worker that finds it full waits for the settler.
	unposted int
	// afterRecord: the claim asked for follows a recorded batch (a claim that finds nothing
	// then asks a pass for when the next falls due).
	afterRecord bool
	// drained: the last claim found fewer due deliveries than it asked for, so a slot freed by
	// a worker asks for no claim (it would find none) until something may have become due: a
	// commit, a pass, a recorded batch (wantClaims), or a claim that found all it asked for.
	drained bool
	// postTime is a moving average of the subscription's POSTs' durations (0 before the first):
	// the queue is kept no longer than the workers post within half a lease's usable part.
	postTime time.Duration
	// expired counts the claimed deliveries no worker took before their lease ran short:
	// never posted (claimed again once the lease ends).
	expired int
	// secretWaits counts, per event, the waits for a new subscription's signing Secret.
	secretWaits map[string]int
	// signing is the signer last read from the subscription's Secret, at signingRead, from
	// signingRef (signerOf).
	signing     credentials
	signingRef  flexv1.SecretKeyReference
	signingKey  string
	signingRead time.Time
}

// signingFresh is how long a signing secret read is used before it is read again: a burst's
// deliveries read the Secret from the API server once a second instead of once each (a
// quorum read apiece), and a rotated secret signs within a second.
const signingFresh = time.Second

// signerOf answers the subscription's signer, read again once signingFresh has passed or the
// subscription names another Secret. A failed read is not kept: the next delivery reads again.
func (st *subState) signerOf(ctx context.Context, sub *flexv1.Subscription) (credentials, error) {
	now := st.d.Now()
	bearerKey := ""
	if sub.Spec.IsOpenADR() {
		bearerKey = sub.Spec.OpenADR.BearerTokenKey
	}
	st.mu.Lock()
	cred := st.signing
	if cred.wh != nil && (st.signingRef != sub.Spec.SecretRef || st.signingKey != bearerKey ||
		now.Sub(st.signingRead) >= signingFresh) {
		cred = credentials{}
	}
	st.mu.Unlock()
	if cred.wh != nil {
		return cred, nil
	}
	cred, err := st.d.signer(ctx, sub)
	if err != nil {
		return credentials{}, err
	}
	st.mu.Lock()
	st.signing, st.signingRef, st.signingKey, st.signingRead = cred, sub.Spec.SecretRef, bearerKey, now
	st.mu.Unlock()
	return cred, nil
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
			st = &subState{d: d, key: client.ObjectKeyFromObject(s), uid: string(s.UID), cancel: cancel, seen: d.Now(),
				queued:  make(chan struct{}, 1),
				settled: make(chan outboxstore.Settled, settledRoom(d.Workers)), claims: make(chan struct{}, 1),
				dirty: make(chan struct{}, 1), secretWaits: map[string]int{}}
			d.subs[s.UID] = st
			for range d.Workers {
				d.wg.Add(1)
				go func() {
					defer d.wg.Done()
					st.work(wctx)
				}()
			}
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				st.settle(wctx)
			}()
			for range claimers {
				d.wg.Add(1)
				go func() {
					defer d.wg.Done()
					st.claimer(wctx)
				}()
			}
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				st.statusWriter(wctx)
			}()
		}
		st.mu.Lock()
		changed := st.sub.Spec.Paused != s.Spec.Paused || st.sub.Generation != s.Generation
		st.sub = *s.DeepCopy()
		st.mu.Unlock()
		if !ok || changed {
			st.markDirty() // first seen, paused or resumed: the Ready condition says so
		}
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

func (d *Deliverer) stateOf(uid types.UID) *subState {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.subs[uid]
}

func (st *subState) markDirty() {
	select {
	case st.dirty <- struct{}{}:
	default:
	}
}

// wantClaims asks the claimer to fill the queue (afterRecord: see subState): something may
// have become due.
func (st *subState) wantClaims(afterRecord bool) {
	st.mu.Lock()
	st.afterRecord = st.afterRecord || afterRecord
	st.drained = false
	st.mu.Unlock()
	st.askClaim()
}

// roomFreed asks for a claim for a slot a worker freed, once a quarter of the queue is free
// (until then its workers have plenty queued, and a claim for each delivery posted would cost
// the database a statement each), unless the last claim found nothing more due (drained).
func (st *subState) roomFreed() {
	st.mu.Lock()
	depth := st.depth()
	ask := !st.drained && depth-st.unposted >= max(depth/4, 1)
	st.mu.Unlock()
	if ask {
		st.askClaim()
	}
}

func (st *subState) askClaim() {
	select {
	case st.claims <- struct{}{}:
	default:
	}
}

// claimers is how many claimers a subscription has: a burst's claims, each a statement's round
// trip, overlap in flight instead of taking turns on the wire; the database runs a
// subscription's claims one after another (outboxstore.Claim), so that none locks the rows
// another has just claimed.
const claimers = 2

// claimer claims deliveries when asked (by a pass, a batch recorded, a delivery dropped)
// until ctx ends: claims never wait for a batch to be recorded, nor records for a claim.
func (st *subState) claimer(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.claims:
		}
		st.mu.Lock()
		afterRecord := st.afterRecord
		st.afterRecord = false
		st.mu.Unlock()
		n, asked, err := st.claim(ctx)
		if err != nil && ctx.Err() == nil {
			ctrl.LoggerFrom(ctx).Error(err, "claiming deliveries", "subscription", st.key)
		}
		// The sites' next events (or other sites') are claimed at once; a pass is asked for
		// only when there is none, to learn when the next falls due. A failed claim waits for
		// the next pass (at most Interval away), which asks again.
		if err == nil && afterRecord && asked > 0 && n == 0 {
			st.d.Kick()
		}
	}
}

// claim leases due deliveries, as many as bring the subscription's unposted ones to Workers +
// Lookahead, and queues them: the workers find the next deliveries queued when they finish
// one, instead of waiting for a claim's round trip (and a batch's record). The slots are
// reserved before the claim, so that the queue never blocks. It answers how many it claimed
// and asked for.
func (st *subState) claim(ctx context.Context) (claimed, asked int, err error) {
	st.mu.Lock()
	depth := st.depth()
	free := depth - st.unposted
	if free <= 0 || st.sub.Spec.Paused {
		st.mu.Unlock()
		return 0, 0, nil
	}
	// At most a share of the queue a claim: the rest is left to another claimer, at once. An
	// idle subscription's first claim takes only what its workers post at once, so that they
	// start while the other claimer's larger claim runs (a burst's first arrival waits for a
	// short statement, not for the queue's share).
	share := depth / claimers
	if st.unposted == 0 {
		share = min(share, st.d.Workers)
	}
	rest := max(free-share, 0)
	free -= rest
	st.unposted += free
	st.mu.Unlock()
	if rest > 0 {
		st.askClaim()
	}
	// The lease runs from the statement's start in the database, later than this.
	leasedAt := time.Now()
	got, err := st.d.Store.Claim(ctx, st.uid, free, st.d.Lease)
	claimedAt := time.Now()
	metrics.NotificationStage.WithLabelValues(metrics.StageClaim).Observe(claimedAt.Sub(leasedAt).Seconds())
	st.mu.Lock()
	st.unposted -= free - len(got)
	if err == nil {
		st.drained = len(got) < free
	}
	st.mu.Unlock()
	for i := range got {
		got[i].ClaimedAt, got[i].LeasedAt = claimedAt, leasedAt
		metrics.NotificationStage.WithLabelValues(metrics.StageClaimed).Observe(claimedAt.Sub(got[i].Event.Time).Seconds())
	}
	if len(got) > 0 {
		st.mu.Lock()
		st.queue = append(st.queue, got...)
		st.mu.Unlock()
		st.signalQueued()
	}
	return len(got), free, err
}

// signalQueued wakes a worker to take from the queue.
func (st *subState) signalQueued() {
	select {
	case st.queued <- struct{}{}:
	default:
	}
}

// next takes the first queued delivery, waiting for one until ctx ends (ok false). A worker
// that takes one and leaves more wakes another.
func (st *subState) next(ctx context.Context) (c outboxstore.Delivery, ok bool) {
	for {
		st.mu.Lock()
		if n := len(st.queue); n > 0 {
			c = st.queue[0]
			st.queue[0] = outboxstore.Delivery{}
			st.queue = st.queue[1:]
			if n == 1 {
				st.queue = nil // the room goes with the last one
			}
			st.mu.Unlock()
			if n > 1 {
				st.signalQueued()
			}
			return c, true
		}
		st.mu.Unlock()
		select {
		case <-ctx.Done():
			return c, false
		case <-st.queued:
		}
	}
}

// settledRoom is how many outcomes may wait for the settler (and how many one batch records):
// enough for the workers' posts during a record's round trip.
func settledRoom(workers int) int { return 16 * workers }

// depth is how many deliveries may be claimed and not yet posted: Workers + Lookahead, fewer
// when the receiver answers so slowly that a queue that deep would not be posted within half
// the lease's usable part (postable), never fewer than Workers. Called with mu held.
func (st *subState) depth() int {
	depth := st.d.Workers + st.d.Lookahead
	if st.postTime > 0 {
		usable := st.d.Lease - min(Timeout, st.d.Lease/2)
		if fit := int(float64(st.d.Workers) * float64(usable) / (2 * float64(st.postTime))); fit < depth {
			depth = max(fit, st.d.Workers)
		}
	}
	return depth
}

// posted adds a POST's duration to the moving average.
func (st *subState) posted(took time.Duration) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.postTime == 0 {
		st.postTime = took
		return
	}
	st.postTime += (took - st.postTime) / 8
}

// postable answers whether a queued delivery's lease leaves time for its POST: it is posted
// only while at least the attempt's Timeout (half the lease, when shorter) of it is left, so
// that its POST ends before anyone else may claim it. One that waited longer in the queue
// (a receiver that answers slowly) is never posted by this worker: once its lease ends it is
// claimed again, by any replica, and its site's next event still waits for it. Posting it
// late could deliver it after its site's next event, delivered meanwhile by another worker.
func (st *subState) postable(c outboxstore.Delivery) bool {
	return time.Since(c.LeasedAt) < st.d.Lease-min(Timeout, st.d.Lease/2)
}

// work attempts the deliveries of one subscription until ctx ends, and hands their outcomes
// to settle; each one posted (or dropped) frees a slot for the claimer.
func (st *subState) work(ctx context.Context) {
	for {
		c, ok := st.next(ctx)
		if !ok {
			return
		}
		metrics.NotificationStage.WithLabelValues(metrics.StageWorkerWait).Observe(time.Since(c.ClaimedAt).Seconds())
		if !st.postable(c) {
			ctrl.LoggerFrom(ctx).V(1).Info("a claimed delivery waited past its lease's margin: left to be claimed again",
				"subscription", st.key, "event", c.Event.ID)
			st.mu.Lock()
			st.unposted--
			st.expired++
			st.mu.Unlock()
			st.roomFreed()
			continue
		}
		o, ok := st.deliver(ctx, c)
		st.mu.Lock()
		st.unposted--
		st.mu.Unlock()
		st.roomFreed()
		if !ok {
			continue
		}
		select {
		case st.settled <- outboxstore.Settled{Delivery: c, Outcome: o}:
		case <-ctx.Done():
			return
		}
	}
}

// settle records the outcomes the workers hand it until ctx ends: all those waiting at once in
// one SQL transaction (while one batch commits, the next gathers), then wakes the claimer. A
// site's next event becomes claimable only when its previous one's outcome is recorded, so a
// site never has two events in flight.
func (st *subState) settle(ctx context.Context) {
	batch := make([]outboxstore.Settled, 0, cap(st.settled))
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-st.settled:
			batch = append(batch[:0], s)
		}
	gather:
		for len(batch) < cap(batch) {
			select {
			case s := <-st.settled:
				batch = append(batch, s)
			default:
				break gather
			}
		}
		recordStart := time.Now()
		err := st.d.Store.RecordAll(ctx, batch)
		metrics.NotificationStage.WithLabelValues(metrics.StageRecord).Observe(time.Since(recordStart).Seconds())
		if err != nil && ctx.Err() == nil {
			// Not recorded: the leases expire and the events are attempted again (at least once).
			ctrl.LoggerFrom(ctx).Error(err, "recording deliveries' outcomes", "subscription", st.key, "outcomes", len(batch))
		}
		gone := false
		for _, s := range batch {
			gone = gone || s.Outcome.Result == outboxstore.Gone
		}
		if gone {
			if err := st.pause(ctx); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "pausing the subscription after 410 Gone", "subscription", st.key)
			}
		}
		st.markDirty()
		// A recorded delivery lets its site's next event be claimed.
		st.wantClaims(true)
	}
}

// deliver attempts one delivery and answers its outcome, and whether to record it (not when
// stopping: the lease expires, and the event is delivered again).
func (st *subState) deliver(ctx context.Context, c outboxstore.Delivery) (outboxstore.Outcome, bool) {
	d := st.d
	st.mu.Lock()
	sub := st.sub.DeepCopy()
	st.mu.Unlock()

	start, began := d.Now(), time.Now()
	code := 0
	cred, err := st.signerOf(ctx, sub)
	if apierrors.IsNotFound(err) {
		if wait, ok := st.awaitSecret(c.Event.ID, start); ok {
			// Not made yet: no attempt; the delivery is claimed again in a moment.
			return outboxstore.Outcome{Result: outboxstore.NotAttempted, Retry: wait}, ctx.Err() == nil
		}
	}
	if err == nil {
		code, err = d.attempt(ctx, sub, cred, &c.Event)
	}
	if ctx.Err() != nil {
		return outboxstore.Outcome{}, false
	}
	o := outboxstore.Outcome{At: start, StatusCode: code, Latency: d.Now().Sub(start)}
	st.posted(time.Since(began))
	switch {
	case err == nil:
		o.Result = outboxstore.Delivered
		metrics.NotificationStage.WithLabelValues(metrics.StageDelivered).Observe(time.Since(c.Event.Time).Seconds())
	case code == http.StatusGone:
		o.Result = outboxstore.Gone
	case d.Schedule.Expired(c.Event.Time, d.Now()):
		o.Result = outboxstore.GivenUp
	case errors.Is(err, errSigningSecret):
		o.Result, o.Retry = outboxstore.SecretMissing, d.Schedule.Delay(c.Attempts+1)
	default:
		o.Result, o.Retry = outboxstore.Failed, d.Schedule.Delay(c.Attempts+1)
	}
	if err != nil {
		// The organisation is told generic words (events.DeliveryErrorText): the error itself
		// may name internal addresses, the resolver and its answers. It goes to this log only.
		o.Error = events.DeliveryErrorText(err, code)
		ctrl.LoggerFrom(ctx).V(1).Info("a delivery attempt failed", "subscription", st.key, "event", c.Event.ID,
			"attempt", c.Attempts+1, "statusCode", code, "error", truncate(err.Error(), 1024))
	}
	metrics.NotificationDeliveries.WithLabelValues(string(c.Event.Type), string(o.Result)).Inc()
	st.mu.Lock()
	delete(st.secretWaits, c.Event.ID)
	st.mu.Unlock()
	return o, true
}

// awaitSecret: a subscription's signing Secret may be made a moment after the Subscription
// (the REST API makes it just after, as it is owned by the Subscription), and the first
// event may be due in between. While the subscription is new to this deliverer (SecretGrace),
// a missing Secret is waited for (25 ms, doubling to 1 s) instead of counted as a failed
// attempt retried seconds later. It answers the wait, and whether to wait.
func (st *subState) awaitSecret(id string, now time.Time) (time.Duration, bool) {
	if now.Sub(st.seen) >= st.d.SecretGrace {
		return 0, false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	n := st.secretWaits[id]
	st.secretWaits[id] = n + 1
	return min(secretWait<<min(n, 16), secretWaitMax), true
}

// statusWriter writes the subscription's status when asked (markDirty), at most every
// statusEvery, until ctx ends.
func (st *subState) statusWriter(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.dirty:
		}
		if err := st.writeStatus(ctx); err != nil && ctx.Err() == nil {
			ctrl.LoggerFrom(ctx).V(1).Info("writing a subscription's delivery state", "subscription", st.key, "error", err.Error())
			st.markDirty() // try again
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(statusEvery):
		}
	}
}

// writeStatus writes the delivery state the outbox keeps (every replica's attempts) into the
// subscription's status: one merge patch of the fields it owns, only when they changed.
func (st *subState) writeStatus(ctx context.Context) error {
	stats, err := st.d.Store.StatsOf(ctx, st.uid)
	if err != nil {
		return err
	}
	attempts, err := st.d.Store.Attempts(ctx, st.uid, recentLimit)
	if err != nil {
		return err
	}
	cur := &flexv1.Subscription{}
	if err := st.d.Client.Get(ctx, st.key, cur); err != nil {
		return client.IgnoreNotFound(err)
	}
	base := cur.DeepCopy()
	s := &cur.Status
	s.Delivered, s.FailedAttempts, s.Dropped, s.ConsecutiveFailures = stats.Delivered, stats.FailedAttempts, stats.GivenUp,
		stats.ConsecutiveFailures
	if stats.Last != "" {
		s.LastDelivery = &flexv1.DeliveryResult{Time: metav1.NewTime(stats.LastAt.Truncate(time.Second)),
			StatusCode: int32(stats.LastStatus), LatencyMillis: stats.LastLatency.Milliseconds()} //nolint:gosec // an HTTP status
	}
	s.RecentDeliveries = nil
	for _, a := range attempts {
		s.RecentDeliveries = append(s.RecentDeliveries, flexv1.DeliveryAttempt{EventID: a.EventID, Type: a.Type,
			Attempt: int32(min(a.Attempt, 1<<30)), Time: metav1.NewTime(a.At.Truncate(time.Second)), //nolint:gosec // bounded
			LatencyMillis: a.Latency.Milliseconds(), StatusCode: int32(a.StatusCode), //nolint:gosec // an HTTP status
			Error: events.PublicDeliveryError(a.Error)})
	}
	meta.SetStatusCondition(&s.Conditions, readyCondition(cur, stats))
	if equality.Semantic.DeepEqual(base.Status, cur.Status) {
		return nil
	}
	return st.d.Client.Status().Patch(ctx, cur, client.MergeFrom(base))
}

// readyCondition is a subscription's Ready condition, from its spec and its last outcome.
func readyCondition(sub *flexv1.Subscription, stats outboxstore.Stats) metav1.Condition {
	cond := metav1.Condition{Type: flexv1.ReadyCondition, ObservedGeneration: sub.Generation}
	switch {
	case sub.Spec.Paused && stats.Last == outboxstore.Gone:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, flexv1.ReasonPaused, "The receiver answered 410 Gone: subscription paused"
	case sub.Spec.Paused:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, flexv1.ReasonPaused, "The subscription is paused"
	case stats.Last == "" || stats.Last == outboxstore.Gone:
		cond.Status, cond.Reason = metav1.ConditionTrue, flexv1.ReasonDelivering
		cond.Message = "Events are recorded for this subscription; none delivered since it was created or resumed"
	case stats.Last == outboxstore.Delivered:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, flexv1.ReasonDelivering, "The last delivery succeeded"
	case stats.Last == outboxstore.SecretMissing:
		cond.Status, cond.Reason = metav1.ConditionFalse, flexv1.ReasonSecretMissing
		cond.Message = "Deliveries fail and are retried: " + events.PublicDeliveryError(stats.LastError)
	default:
		cond.Status, cond.Reason = metav1.ConditionFalse, flexv1.ReasonDeliveryFailing
		cond.Message = "Deliveries fail and are retried: " + events.PublicDeliveryError(stats.LastError)
	}
	return cond
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

// Package delivery delivers the notification events of the one outbox in PostgreSQL
// (internal/outboxstore) to the organisations' Subscriptions: signed with Standard Webhooks,
// retried with backoff, in order per site and subscription, isolated per subscription, by any
// replica (no leader election).
//
// Flow: a pass (on every insert into the outbox, told by PostgreSQL's NOTIFY; on every change
// of a Subscription; and at least every Interval) first fans out the new events whose writer's
// transaction is below the horizon (the oldest transaction still running), in (xid, id) order:
// each gets one delivery row per subscription that wants it (subscriptions as this replica's
// cache knows them), in one SQL transaction, events another replica is fanning out skipped
// (FOR UPDATE SKIP LOCKED); each batch fanned out wakes the claimers of the subscriptions it
// fed. (The dispatches' events come with their delivery rows, written by their issuer for the
// subscriptions SubscribersOf names, and their claimers are woken by Committed.) While
// committed events wait beyond the horizon, the next pass comes within heldPollMax
// (the transaction holding them ends unannounced). It then asks which subscriptions have a
// delivery due and wakes their claimers. A subscription's claimers (claimers, each taking at
// most its share of the queue, their statements overlapping) claim due deliveries, each
// the head of its site, as many as keep its claimed-and-unposted ones at Workers + Lookahead:
// a lease (claimed_until) in one statement, queued for the workers, so that a worker finds its
// next delivery waiting rather than a claim's round trip. A worker posts the event outside any
// transaction (a queued delivery only while enough of its lease is left for the POST: one that
// waited longer is dropped unposted and claimed again once its lease ends); the subscription's
// settler records the outcomes, all those ready together in one round trip (a burst to one
// subscription costs a commit per batch, not per event), then wakes the claimer for as many as
// it freed: delivered; failed (the next attempt's time, with backoff and jitter, is in the
// row); given up once the retry horizon has passed (kept, marked, counted); 410 Gone pauses the
// subscription. A replica that dies between its POST and its outcome lets the lease expire: the
// event is delivered again, with the same webhook-id (at least once). A claimed delivery stays
// pending until its outcome is recorded, so its site's next event is never claimed before it.
//
// Isolation: each subscription has its own Workers goroutines (DefaultWorkers) and claims at
// most Lookahead deliveries beyond them (a delivery counts until it is posted), so a
// slow or dead receiver only keeps its own workers busy, and reconcilers never wait on
// delivery. Nothing is capped and nothing dropped: the outbox holds what is pending for
// as long as it takes.
package delivery

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/outboxstore"
)

// +kubebuilder:rbac:groups=flexsite.io,resources=subscriptions,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=subscriptions/status,verbs=get;update;patch
// Signing secrets: in organisation namespaces only (bootstrap.OrganisationAccess).

// Timeout is how long a receiver has to answer.
const Timeout = 10 * time.Second

// DefaultLease is the default Lease: longer than an attempt can take (Timeout, and the
// signing Secret's read), so that a live worker's claim never expires under it.
const DefaultLease = time.Minute

// heldPollMin and heldPollMax bound the wait between passes while a committed event waits for
// the horizon (outboxstore.Held): the transaction holding it back ends unannounced (NOTIFY
// tells only of inserts), so the deliverer looks again soon, doubling the wait from heldPollMin
// up to heldPollMax while it lasts, and stops looking once nothing is held back.
const (
	heldPollMin = 2 * time.Millisecond
	heldPollMax = 100 * time.Millisecond
)

// heldLogAfter is how long events must have waited for the horizon before the deliverer logs
// the session holding it (at most every heldLogAfter).
const heldLogAfter = 10 * time.Second

// DefaultSecretGrace is the default SecretGrace.
const DefaultSecretGrace = 10 * time.Second

// DefaultRetention is the default Retention.
const DefaultRetention = 7 * 24 * time.Hour

// DefaultSecretKey is the key of a subscription's Secret holding the signing secret.
const DefaultSecretKey = "secret"

// DefaultWorkers is the default Workers: how many of a subscription's deliveries are in flight
// at once, at most (posted, or waiting for their outcome to be recorded).
const DefaultWorkers = 16

// DefaultLookahead is the default Lookahead, in Workers: while a subscription's workers post,
// up to that many more of its due deliveries are claimed and queued, so that a worker that
// finishes finds its next one at once rather than after a claim's round trip, and a burst is
// claimed in few statements. A receiver that answers slowly gets a shorter queue (subState.depth).
const DefaultLookahead = 31

// fanOutBatch is how many events one fan-out transaction takes.
const fanOutBatch = 500

// recentLimit is how many delivery attempts a subscription's status shows.
const recentLimit = 20

// Deliverer delivers the outbox's events. Client reads from the cache and writes; APIReader
// reads the signing Secrets (the cache holds no organisation Secret).
type Deliverer struct {
	Client    client.Client
	APIReader client.Reader
	Cache     cache.Cache
	// Store is the outbox.
	Store *outboxstore.Store
	// Schedule of retries (events.DefaultSchedule when zero).
	Schedule events.Schedule
	// Policy decides which addresses deliveries may connect to.
	Policy events.AddressPolicy
	// RootCAs trusted for the receivers' certificates (nil: the system's).
	RootCAs *x509.CertPool
	// Workers per subscription (DefaultWorkers when 0).
	Workers int
	// Lookahead is how many deliveries a subscription claims beyond its busy workers, queued
	// for the next free worker (DefaultLookahead times Workers when 0).
	Lookahead int
	// Interval between passes when nothing wakes the deliverer (1 s when 0).
	Interval time.Duration
	// Lease is how long a claimed delivery is this worker's (DefaultLease when 0).
	Lease time.Duration
	// SecretGrace is how long after the deliverer first sees a subscription a missing signing
	// Secret is waited for rather than counted as a failed delivery (DefaultSecretGrace when
	// 0): the REST API makes the Secret just after the Subscription (it is owned by it, so it
	// needs its UID), and the first event may be due in between.
	SecretGrace time.Duration
	// Retention is how long delivered events are kept (DefaultRetention when 0).
	Retention time.Duration
	// Now is the clock.
	Now func() time.Time
	// OpenADR shapes the notifications of OpenADR subscriptions (spec.openADR): the OpenADR
	// door's shape of an event, injected by the wiring (docs/openadr.md, "Subscriptions").
	// Without it, their deliveries fail and are retried.
	OpenADR OpenADRNotifier

	http *http.Client
	kick chan struct{}
	mu   sync.Mutex
	subs map[types.UID]*subState
	// gone are the subscriptions deleted since the last pass, whose deliveries it forgets.
	gone []string
	wg   sync.WaitGroup
	// lastBacklog and lastCleanup are when the pass last measured the backlog and cleaned up.
	lastBacklog, lastCleanup time.Time
	// heldPoll is the wait before the next pass while events wait for the horizon (0: none do).
	heldPoll time.Duration
	// lastHeldLog is when the pass last logged the session holding the horizon.
	lastHeldLog time.Time
}

// OpenADRNotifier shapes an outbox event as the OpenADR notification an OpenADR subscription
// receives: the body, or send false when the subscription is owed nothing of it (an event of
// another program, or one its maker does not see).
type OpenADRNotifier interface {
	Notification(ctx context.Context, sub *flexv1.Subscription, ev *events.Event) (body []byte, send bool, err error)
}

// errNoOpenADR: an OpenADR subscription's delivery, and no OpenADRNotifier to shape it.
var errNoOpenADR = errors.New("no OpenADR notifier to shape the notification")

// NeedLeaderElection: every replica delivers (the outbox's claims keep them apart).
func (d *Deliverer) NeedLeaderElection() bool { return false }

// SetupWithManager registers the deliverer with mgr.
func (d *Deliverer) SetupWithManager(_ context.Context, mgr ctrl.Manager) error {
	if d.Store == nil {
		return errors.New("the deliverer needs the outbox (a database)")
	}
	if d.Client == nil {
		d.Client = mgr.GetClient()
	}
	if d.APIReader == nil {
		d.APIReader = mgr.GetAPIReader()
	}
	if d.Cache == nil {
		d.Cache = mgr.GetCache()
	}
	return mgr.Add(d)
}

func (d *Deliverer) defaults() {
	if d.Schedule.Horizon == 0 {
		d.Schedule = events.DefaultSchedule
	}
	if d.Workers <= 0 {
		d.Workers = DefaultWorkers
	}
	if d.Lookahead <= 0 {
		d.Lookahead = DefaultLookahead * d.Workers
	}
	if d.Interval <= 0 {
		d.Interval = time.Second
	}
	if d.Lease <= 0 {
		d.Lease = DefaultLease
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.SecretGrace <= 0 {
		d.SecretGrace = DefaultSecretGrace
	}
	if d.Retention <= 0 {
		d.Retention = DefaultRetention
	}
	d.kick = make(chan struct{}, 1)
	d.subs = map[types.UID]*subState{}
	d.http = d.newHTTPClient()
}

// newHTTPClient connects only to addresses the policy allows (checked on the resolved address
// at connect time), uses no proxy, follows no redirect and gives up after Timeout.
func (d *Deliverer) newHTTPClient() *http.Client {
	dialer := &net.Dialer{Timeout: Timeout, Control: d.Policy.Control}
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         dialer.DialContext,
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: d.RootCAs},
		TLSHandshakeTimeout: Timeout,
		// A subscription's workers post at once: each keeps its connection between deliveries.
		MaxIdleConnsPerHost: d.Workers,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &http.Client{Transport: tr, Timeout: Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Start fans out and delivers until ctx ends.
func (d *Deliverer) Start(ctx context.Context) error {
	d.defaults()
	log := ctrl.LoggerFrom(ctx).WithName("notifier")
	ctx = ctrl.LoggerInto(ctx, log)
	inf, err := d.Cache.GetInformer(ctx, &flexv1.Subscription{})
	if err != nil {
		return err
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.Kick() },
		UpdateFunc: func(_, _ any) { d.Kick() },
		DeleteFunc: func(o any) {
			if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = tomb.Obj
			}
			if sub, ok := o.(*flexv1.Subscription); ok {
				// What the outbox keeps for it goes with it, at the end of the next pass: after
				// any fan-out that pass makes from a list that still held it.
				d.mu.Lock()
				d.gone = append(d.gone, string(sub.UID))
				d.mu.Unlock()
			}
			d.Kick()
		},
	}); err != nil {
		return err
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		d.Store.Listen(ctx, d.Kick)
	}()
	if !d.Cache.WaitForCacheSync(ctx) {
		return nil
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			d.stopAll()
			d.wg.Wait()
			return nil
		case <-d.kick:
		case <-timer.C:
		}
		wait, err := d.pass(ctx)
		if err != nil && ctx.Err() == nil {
			log.Error(err, "delivering the outbox")
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(max(wait, heldPollMin))
	}
}

// owed are the subscriptions among subs (an organisation's) an event of type t is owed: the
// one rule the fan-out and the writers that fan out themselves (SubscribersOf) follow.
func owed(subs []*flexv1.Subscription, t flexv1.EventType) []string {
	uids := []string{}
	for _, s := range subs {
		if events.Wants(s, t) {
			uids = append(uids, string(s.UID))
		}
	}
	return uids
}

// SubscribersOf answers the subscriptions of an organisation owed events of type t, as a pass
// would fan such an event out now (from the same cache), for a writer that writes the
// events' delivery rows in its own transaction (internal/dispatchstore); ok is false before
// the deliverer is set up, or when the cache cannot answer.
func (d *Deliverer) SubscribersOf(ctx context.Context, organisation string, t flexv1.EventType) ([]string, bool) {
	if d.Client == nil {
		return nil, false
	}
	list := &flexv1.SubscriptionList{}
	if err := d.Client.List(ctx, list, client.InNamespace(organisation)); err != nil {
		return nil, false
	}
	subs := make([]*flexv1.Subscription, len(list.Items))
	for i := range list.Items {
		subs[i] = &list.Items[i]
	}
	return owed(subs, t), true
}

// Committed is told the subscriptions whose delivery rows a writer has just committed (with
// its events, SubscribersOf): their claimers claim at once, without waiting for the NOTIFY's
// pass. A subscription this replica runs no workers for yet gets a pass.
func (d *Deliverer) Committed(uids []string) {
	for _, uid := range uids {
		if st := d.stateOf(types.UID(uid)); st != nil {
			st.wantClaims(false)
		} else {
			d.Kick()
		}
	}
}

// Kick asks for a pass soon.
func (d *Deliverer) Kick() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// pass fans out the new events and hands the due deliveries to the subscriptions' free
// workers. It answers how soon to look again.
func (d *Deliverer) pass(ctx context.Context) (time.Duration, error) {
	list := &flexv1.SubscriptionList{}
	if err := d.Client.List(ctx, list); err != nil {
		return d.Interval, err
	}
	d.syncSubscriptions(ctx, list.Items)
	byNS := map[string][]*flexv1.Subscription{}
	byUID := map[string]*flexv1.Subscription{}
	var active []string
	for i := range list.Items {
		s := &list.Items[i]
		byNS[s.Namespace] = append(byNS[s.Namespace], s)
		byUID[string(s.UID)] = s
		if !s.Spec.Paused && s.DeletionTimestamp.IsZero() {
			active = append(active, string(s.UID))
		}
	}
	now := d.Now()
	fannedAt := time.Now()
	// fedSubs are the subscriptions the current fan-out batch gave deliveries.
	fedSubs := map[string]bool{}
	targets := func(u outboxstore.Unfanned) ([]string, bool) {
		if u.SubscriptionUID != "" {
			s, ok := byUID[u.SubscriptionUID]
			if !ok {
				// A ping for a subscription this cache does not show yet waits a moment.
				return nil, now.Sub(u.Time) > time.Minute
			}
			if s.Spec.Paused || !s.DeletionTimestamp.IsZero() {
				return nil, true
			}
			fedSubs[u.SubscriptionUID] = true
			return []string{u.SubscriptionUID}, true
		}
		uids := owed(byNS[u.Organisation], u.Type)
		for _, uid := range uids {
			fedSubs[uid] = true
		}
		metrics.NotificationStage.WithLabelValues(metrics.StageFannedOut).Observe(fannedAt.Sub(u.Time).Seconds())
		return uids, true
	}
	for {
		n, err := d.Store.FanOut(ctx, fanOutBatch, targets)
		if err != nil {
			return d.Interval, err
		}
		// The subscriptions fed claim at once, while the next batch is fanned out.
		for uid := range fedSubs {
			if st := d.stateOf(types.UID(uid)); st != nil {
				st.wantClaims(false)
			}
			delete(fedSubs, uid)
		}
		if n < fanOutBatch {
			break
		}
	}
	// Committed events the horizon holds back: measured, and looked at again soon.
	held, heldAge, err := d.Store.Held(ctx, active)
	if err != nil {
		return d.Interval, err
	}
	metrics.NotificationHorizonHeldAge.Set(heldAge.Seconds())
	if heldAge >= heldLogAfter && time.Since(d.lastHeldLog) >= heldLogAfter {
		d.lastHeldLog = time.Now()
		d.logHolder(ctx, heldAge)
	}
	switch {
	case !held:
		d.heldPoll = 0
	case d.heldPoll == 0:
		d.heldPoll = heldPollMin
	default:
		d.heldPoll = min(2*d.heldPoll, heldPollMax)
	}
	due, next, err := d.Store.Due(ctx, active)
	if err != nil {
		return d.Interval, err
	}
	for _, uid := range due {
		if st := d.stateOf(types.UID(uid)); st != nil {
			st.wantClaims(false)
		}
	}
	d.mu.Lock()
	gone := d.gone
	d.gone = nil
	d.mu.Unlock()
	for i, uid := range gone {
		if err := d.Store.Forget(ctx, uid); err != nil {
			d.mu.Lock()
			d.gone = append(d.gone, gone[i:]...) // the next pass tries again
			d.mu.Unlock()
			return d.Interval, err
		}
	}
	d.housekeeping(ctx, byUID)
	wait := d.Interval
	if !next.IsZero() {
		wait = min(wait, time.Until(next))
	}
	if d.heldPoll > 0 {
		wait = min(wait, d.heldPoll)
	}
	return wait, nil
}

// logHolder says which session holds notifications back (docs/operations.md, "Delivery horizon").
func (d *Deliverer) logHolder(ctx context.Context, heldAge time.Duration) {
	log := ctrl.LoggerFrom(ctx)
	h, ok, err := d.Store.HorizonHolder(ctx)
	if err != nil || !ok {
		log.Info("notifications are held back by a database transaction that is still running", "heldFor", heldAge.Round(time.Second))
		return
	}
	log.Info("notifications are held back by a database transaction that is still running", "heldFor", heldAge.Round(time.Second),
		"pid", h.PID, "user", h.User, "applicationName", h.ApplicationName, "state", h.State, "transactionAge", h.Age.Round(time.Second))
}

// housekeeping measures the backlog (every few seconds) and deletes what was delivered long
// ago, and the deliveries of subscriptions that no longer exist (hourly; a replica that was
// down when a subscription was deleted, or fanned out from a list that still held it, may have
// left some). Any replica may: each step is idempotent.
func (d *Deliverer) housekeeping(ctx context.Context, known map[string]*flexv1.Subscription) {
	now := d.Now()
	if now.Sub(d.lastBacklog) >= 5*time.Second {
		d.lastBacklog = now
		if pending, oldest, err := d.Store.Backlog(ctx); err == nil {
			metrics.NotificationsPending.Set(float64(pending))
			metrics.NotificationOldestPendingAge.Set(oldest.Seconds())
		}
	}
	if now.Sub(d.lastCleanup) >= time.Hour {
		d.lastCleanup = now
		if err := d.Store.Cleanup(ctx, d.Retention); err != nil && ctx.Err() == nil {
			ctrl.LoggerFrom(ctx).Error(err, "deleting delivered notifications past their retention")
		}
		uids := make([]string, 0, len(known))
		for uid := range known {
			uids = append(uids, uid)
		}
		// Only deliveries of events older than any cache's lag: another replica may know a
		// subscription created a moment ago that this one does not show yet.
		if err := d.Store.ForgetUnknown(ctx, uids, 10*time.Minute); err != nil && ctx.Err() == nil {
			ctrl.LoggerFrom(ctx).Error(err, "deleting the deliveries of subscriptions that no longer exist")
		}
	}
}

// attempt posts one event to a subscription's URL, signed with its secret: Flexsite's event
// body, or for an OpenADR subscription the document's notification, with its bearer token as
// Authorization: Bearer (and the same Standard Webhooks headers). An OpenADR subscription owed
// nothing of the event is answered delivered, with nothing sent (status 0).
func (d *Deliverer) attempt(ctx context.Context, sub *flexv1.Subscription, cred credentials,
	ev *events.Event) (int, error) {
	signStart := time.Now()
	body := events.Body(ev)
	if sub.Spec.IsOpenADR() {
		if d.OpenADR == nil {
			return 0, errNoOpenADR
		}
		b, send, err := d.OpenADR.Notification(ctx, sub, ev)
		if err != nil || !send {
			return 0, err
		}
		body = b
	}
	now := d.Now()
	sig, err := cred.wh.Sign(ev.ID, now, body)
	if err != nil {
		return 0, err
	}
	postStart := time.Now()
	metrics.NotificationStage.WithLabelValues(metrics.StageSign).Observe(postStart.Sub(signStart).Seconds())
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, sub.Spec.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set(standardwebhooks.HeaderWebhookID, ev.ID)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	req.Header.Set("user-agent", "flexsite-notifier")
	if cred.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+cred.bearer)
	}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) {
		metrics.NotificationConnections.WithLabelValues(strconv.FormatBool(c.Reused)).Inc()
	}}))
	resp, err := d.http.Do(req)
	metrics.NotificationStage.WithLabelValues(metrics.StagePost).Observe(time.Since(postStart).Seconds())
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, fmt.Errorf("receiver answered %d", resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// errSigningSecret: the subscription's signing secret cannot be used.
var errSigningSecret = events.ErrSigningSecret

// credentials are what a subscription's Secret holds for its deliveries: the signing secret,
// and an OpenADR subscription's bearer token ("": none).
type credentials struct {
	wh     *standardwebhooks.Webhook
	bearer string
}

// signer reads a subscription's signing secret and bearer token (never logged, never copied
// into an object).
func (d *Deliverer) signer(ctx context.Context, sub *flexv1.Subscription) (credentials, error) {
	secret := &corev1.Secret{}
	if err := d.APIReader.Get(ctx, types.NamespacedName{Namespace: sub.Namespace, Name: sub.Spec.SecretRef.Name}, secret); err != nil {
		return credentials{}, fmt.Errorf("%w: reading it: %w", errSigningSecret, err)
	}
	key := sub.Spec.SecretRef.Key
	if key == "" {
		key = DefaultSecretKey
	}
	val, ok := secret.Data[key]
	if !ok || len(val) == 0 {
		return credentials{}, fmt.Errorf("%w: the Secret has no key %s", errSigningSecret, strconv.Quote(key))
	}
	wh, err := standardwebhooks.NewWebhook(string(val))
	if err != nil {
		return credentials{}, fmt.Errorf("%w: not whsec_ + base64", errSigningSecret)
	}
	cred := credentials{wh: wh}
	if o := sub.Spec.OpenADR; sub.Spec.IsOpenADR() && o.BearerTokenKey != "" {
		token, ok := secret.Data[o.BearerTokenKey]
		if !ok || len(token) == 0 {
			return credentials{}, fmt.Errorf("%w: the Secret has no key %s", errSigningSecret, strconv.Quote(o.BearerTokenKey))
		}
		cred.bearer = string(token)
	}
	return cred, nil
}

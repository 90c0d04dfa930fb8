// Package delivery delivers the notification events recorded in the objects' outboxes
// (internal/events) to the organisations' Subscriptions: a leader-elected runnable, signed
// with Standard Webhooks, retried with backoff, in order per site and subscription, isolated
// per subscription.
//
// Flow: a scan (on every change of an object with pending events, of a Subscription, and at
// least every Interval) lists the objects with pending events from the cache (a field index
// keeps it to those), groups their events per namespace and site, and for each subscription
// hands the earliest event of each site it is still owed (the head) to that subscription's
// workers, unless the site is already in flight for it or its retry is not due. A worker posts
// the event and records the outcome: on success (or when the retry horizon has passed, or a
// 410 paused the subscription) it marks the event done for the subscription in the object's
// outbox (a status patch with optimistic concurrency), which removes it once no subscription
// is owed it. Progress is durable (the outbox's doneFor); retry timing is not (a restarted
// manager tries at once). At least once: a crash between the POST and the patch delivers
// again, with the same webhook-id.
//
// Isolation: each subscription has its own Workers goroutines and a queue of the same size;
// the scan never blocks on a queue (a full queue means the site is looked at on the next
// scan), so a slow or dead receiver only keeps its own workers busy, and reconcilers never
// wait on delivery.
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/metrics"
)

// +kubebuilder:rbac:groups=flexsite.io,resources=subscriptions,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=subscriptions/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=sites/status;assets/status;enrolments/status,verbs=get;update;patch
// Signing secrets: in organisation namespaces only (bootstrap.OrganisationAccess).

// PendingIndex is the field index of the objects whose outbox is not empty.
const PendingIndex = "events.pending"

// Timeout is how long a receiver has to answer.
const Timeout = 10 * time.Second

// DefaultHoldBack is the default HoldBack.
const DefaultHoldBack = 500 * time.Millisecond

// DefaultSecretGrace is the default SecretGrace.
const DefaultSecretGrace = 10 * time.Second

// DefaultSecretKey is the key of a subscription's Secret holding the signing secret.
const DefaultSecretKey = "secret"

// recentLimit is how many delivery attempts a subscription's status keeps.
const recentLimit = 20

// Deliverer delivers pending events. Client reads from the cache and writes; APIReader reads
// the signing Secrets (the cache holds no organisation Secret).
type Deliverer struct {
	Client    client.Client
	APIReader client.Reader
	Cache     cache.Cache
	// Schedule of retries (events.DefaultSchedule when zero).
	Schedule events.Schedule
	// Policy decides which addresses deliveries may connect to.
	Policy events.AddressPolicy
	// RootCAs trusted for the receivers' certificates (nil: the system's).
	RootCAs *x509.CertPool
	// Workers per subscription (2 when 0).
	Workers int
	// Interval between scans when nothing changes (1 s when 0).
	Interval time.Duration
	// HoldBack is how old an event must be before it is delivered (DefaultHoldBack when 0).
	// A site's events are recorded in several objects' outboxes by different reconcilers (an
	// asset change is recorded by the Asset's, the eligibility change it causes by the Site's),
	// so an event stamped a moment earlier may reach the cache a moment later; holding events
	// back briefly lets it arrive, so that a site's events go out in the order they happened.
	HoldBack time.Duration
	// SecretGrace is how long after the deliverer first sees a subscription a missing signing
	// Secret is waited for rather than counted as a failed delivery (DefaultSecretGrace when
	// 0): the REST API makes the Secret just after the Subscription (it is owned by it, so it
	// needs its UID), and the first event may be due in between.
	SecretGrace time.Duration
	// Now is the clock.
	Now func() time.Time

	http *http.Client
	kick chan struct{}
	// sweeping is set while a sweep of events owed to nobody runs.
	sweeping atomic.Bool
	mu       sync.Mutex
	subs     map[types.UID]*subState
	wg       sync.WaitGroup
}

// NeedLeaderElection: only the leader delivers.
func (d *Deliverer) NeedLeaderElection() bool { return true }

// SetupWithManager registers the outbox index and the deliverer with mgr.
func (d *Deliverer) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	for _, obj := range []client.Object{&flexv1.Site{}, &flexv1.Asset{}, &flexv1.Enrolment{}, &flexv1.RewardLedger{},
		&flexv1.Subscription{}} {
		if err := mgr.GetFieldIndexer().IndexField(ctx, obj, PendingIndex, pendingKey); err != nil {
			return err
		}
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

func pendingKey(obj client.Object) []string {
	if o, ok := obj.(interface{ GetPendingEvents() []flexv1.PendingEvent }); ok && len(o.GetPendingEvents()) > 0 {
		return []string{"true"}
	}
	return nil
}

func (d *Deliverer) defaults() {
	if d.Schedule.Horizon == 0 {
		d.Schedule = events.DefaultSchedule
	}
	if d.Workers <= 0 {
		d.Workers = 2
	}
	if d.Interval <= 0 {
		d.Interval = time.Second
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.HoldBack <= 0 {
		d.HoldBack = DefaultHoldBack
	}
	if d.SecretGrace <= 0 {
		d.SecretGrace = DefaultSecretGrace
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
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	return &http.Client{Transport: tr, Timeout: Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Start scans and delivers until ctx ends.
func (d *Deliverer) Start(ctx context.Context) error {
	d.defaults()
	log := ctrl.LoggerFrom(ctx).WithName("notifier")
	ctx = ctrl.LoggerInto(ctx, log)
	for _, obj := range []client.Object{&flexv1.Site{}, &flexv1.Asset{}, &flexv1.Enrolment{}, &flexv1.RewardLedger{},
		&flexv1.Subscription{}} {
		inf, err := d.Cache.GetInformer(ctx, obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { d.kickIf(o) },
			UpdateFunc: func(_, o any) { d.kickIf(o) },
			DeleteFunc: func(any) {},
		}); err != nil {
			return err
		}
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
		next, err := d.scan(ctx)
		if err != nil && ctx.Err() == nil {
			log.Error(err, "scanning the notification outboxes")
		}
		// Look again at the interval, or sooner when a held-back event or a retry is due.
		timer.Reset(min(d.Interval, max(next, 10*time.Millisecond)))
	}
}

func (d *Deliverer) kickIf(o any) {
	switch obj := o.(type) {
	case *flexv1.Subscription:
	case interface{ GetPendingEvents() []flexv1.PendingEvent }:
		if len(obj.GetPendingEvents()) == 0 {
			return
		}
	default:
		return
	}
	d.Kick()
}

// Kick asks for a scan soon.
func (d *Deliverer) Kick() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// source is an object with an outbox.
type source interface {
	client.Object
	GetPendingEvents() []flexv1.PendingEvent
	SetPendingEvents([]flexv1.PendingEvent)
}

// item is one pending event and the object whose outbox holds it.
type item struct {
	ev   flexv1.PendingEvent
	kind string
	key  types.NamespacedName
}

// scan finds, for every subscription, the head event of every site and hands it over. It
// answers how soon a head it could not hand over yet (held back, or waiting for its retry)
// falls due (Interval when none).
func (d *Deliverer) scan(ctx context.Context) (time.Duration, error) {
	subs := &flexv1.SubscriptionList{}
	if err := d.Client.List(ctx, subs); err != nil {
		return d.Interval, err
	}
	byNS := map[string][]flexv1.Subscription{}
	for _, s := range subs.Items {
		byNS[s.Namespace] = append(byNS[s.Namespace], s)
	}
	d.syncSubscriptions(ctx, subs.Items)

	items, err := d.pendingItems(ctx)
	if err != nil {
		return d.Interval, err
	}
	now := d.Now()
	next := d.Interval
	pending, oldest := 0, time.Duration(0)
	// Group per namespace and site, in order.
	type groupKey struct{ ns, site string }
	groups := map[groupKey][]item{}
	var orphans []item
	for _, it := range items {
		owed := d.owed(&it, byNS[it.key.Namespace])
		if len(owed) == 0 {
			orphans = append(orphans, it)
			continue
		}
		pending++
		oldest = max(oldest, now.Sub(it.ev.Time.Time))
		site := it.ev.SiteID
		if site == "" {
			site = "event:" + it.ev.ID
		}
		groups[groupKey{it.key.Namespace, site}] = append(groups[groupKey{it.key.Namespace, site}], it)
	}
	metrics.NotificationsPending.Set(float64(pending))
	metrics.NotificationOldestPendingAge.Set(oldest.Seconds())
	for k, g := range groups {
		slices.SortStableFunc(g, func(a, b item) int {
			if c := a.ev.Time.Compare(b.ev.Time.Time); c != 0 {
				return c
			}
			return strings.Compare(a.ev.ID, b.ev.ID)
		})
		for i := range byNS[k.ns] {
			sub := &byNS[k.ns][i]
			st := d.state(sub)
			if st == nil {
				continue
			}
			for _, it := range g {
				if !slices.Contains(d.owed(&it, byNS[k.ns]), sub.Name) || st.isDone(it.ev.ID) {
					continue
				}
				if wait := d.HoldBack - now.Sub(it.ev.Time.Time); wait > 0 {
					next = min(next, wait)
				} else if wait := st.offer(k.site, it, now); wait > 0 {
					next = min(next, wait)
				}
				break // the head only: a site's events go in order
			}
		}
	}
	d.forgetRetries(items)
	d.sweep(ctx, orphans)
	return next, nil
}

// sweep removes the events owed to nobody (their subscriptions went or paused) from their
// outboxes, in the background: each object is a read and a write on the API server, and a
// deleted subscription can leave thousands behind, during which the scan must go on handing
// other subscriptions' events to their workers. One sweep runs at a time; what is left when
// it ends, the next scan finds and sweeps.
func (d *Deliverer) sweep(ctx context.Context, orphans []item) {
	if len(orphans) == 0 || !d.sweeping.CompareAndSwap(false, true) {
		return
	}
	// settle with no subscription removes every event owed to nobody from the object: one
	// call per object.
	type objectKey struct {
		kind string
		key  types.NamespacedName
	}
	seen := make(map[objectKey]bool, len(orphans))
	objects := orphans[:0]
	for _, it := range orphans {
		if k := (objectKey{it.kind, it.key}); !seen[k] {
			seen[k] = true
			objects = append(objects, it)
		}
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer d.sweeping.Store(false)
		for _, it := range objects {
			if ctx.Err() != nil {
				return
			}
			if err := d.settle(ctx, it, ""); err != nil && ctx.Err() == nil {
				ctrl.LoggerFrom(ctx).Error(err, "removing events owed to nobody", "object", it.key)
			}
		}
	}()
}

// owed lists the subscriptions an item is still owed to. A Subscription's own outbox (the
// test ping) is owed to that subscription alone, whatever events it asks for.
func (d *Deliverer) owed(it *item, subs []flexv1.Subscription) []string {
	if it.kind == kindSubscription {
		for i := range subs {
			s := &subs[i]
			if s.Name == it.key.Name && !s.Spec.Paused && !slices.Contains(it.ev.DoneFor, s.Name) {
				return []string{s.Name}
			}
		}
		return nil
	}
	return events.Owed(&it.ev, subs)
}

const (
	kindSite         = "Site"
	kindAsset        = "Asset"
	kindEnrolment    = "Enrolment"
	kindLedger       = "RewardLedger"
	kindSubscription = "Subscription"
)

func newSource(kind string) source {
	switch kind {
	case kindSite:
		return &flexv1.Site{}
	case kindAsset:
		return &flexv1.Asset{}
	case kindEnrolment:
		return &flexv1.Enrolment{}
	case kindLedger:
		return &flexv1.RewardLedger{}
	}
	return &flexv1.Subscription{}
}

// pendingItems lists every pending event from the cache.
func (d *Deliverer) pendingItems(ctx context.Context) ([]item, error) {
	var out []item
	lists := []struct {
		kind string
		list client.ObjectList
	}{{kindSite, &flexv1.SiteList{}}, {kindAsset, &flexv1.AssetList{}}, {kindEnrolment, &flexv1.EnrolmentList{}},
		{kindLedger, &flexv1.RewardLedgerList{}},
		{kindSubscription, &flexv1.SubscriptionList{}}}
	for _, l := range lists {
		if err := d.Client.List(ctx, l.list, client.MatchingFields{PendingIndex: "true"}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		objs, err := meta.ExtractList(l.list)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			src := o.(source)
			for _, ev := range src.GetPendingEvents() {
				out = append(out, item{ev: ev, kind: l.kind, key: client.ObjectKeyFromObject(src)})
			}
		}
	}
	return out, nil
}

// settle marks an item's event done for subscription sub ("" for none) in its object's
// outbox, and removes the events owed to nobody, retrying on conflict.
func (d *Deliverer) settle(ctx context.Context, it item, sub string) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		obj := newSource(it.kind)
		if err := d.APIReader.Get(ctx, it.key, obj); err != nil {
			return client.IgnoreNotFound(err)
		}
		subs := &flexv1.SubscriptionList{}
		if err := d.Client.List(ctx, subs, client.InNamespace(it.key.Namespace)); err != nil {
			return err
		}
		base := obj.DeepCopyObject().(source)
		var out []flexv1.PendingEvent
		var changed bool
		if it.kind == kindSubscription {
			out, changed = settleOwn(obj.GetPendingEvents(), it.ev.ID, sub, obj.(*flexv1.Subscription))
		} else {
			out, changed = events.Settle(obj.GetPendingEvents(), it.ev.ID, sub, subs.Items)
		}
		if !changed {
			return nil
		}
		obj.SetPendingEvents(out)
		return d.Client.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
}

// settleOwn: a Subscription's own event (ping) leaves its outbox once delivered, dropped, or
// when the subscription is paused.
func settleOwn(outbox []flexv1.PendingEvent, id, sub string, s *flexv1.Subscription) ([]flexv1.PendingEvent, bool) {
	out := slices.DeleteFunc(slices.Clone(outbox), func(ev flexv1.PendingEvent) bool {
		return (ev.ID == id && sub != "") || s.Spec.Paused
	})
	return out, len(out) != len(outbox)
}

// attempt posts one event to a subscription's URL, signed with its secret.
func (d *Deliverer) attempt(ctx context.Context, sub *flexv1.Subscription, wh *standardwebhooks.Webhook,
	ev *flexv1.PendingEvent) (int, error) {
	body := events.Body(ev)
	now := d.Now()
	sig, err := wh.Sign(ev.ID, now, body)
	if err != nil {
		return 0, err
	}
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
	resp, err := d.http.Do(req)
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
var errSigningSecret = errors.New("signing secret")

// signer reads a subscription's signing secret (never logged, never copied into an object).
func (d *Deliverer) signer(ctx context.Context, sub *flexv1.Subscription) (*standardwebhooks.Webhook, error) {
	secret := &corev1.Secret{}
	if err := d.APIReader.Get(ctx, types.NamespacedName{Namespace: sub.Namespace, Name: sub.Spec.SecretRef.Name}, secret); err != nil {
		return nil, fmt.Errorf("%w: reading it: %w", errSigningSecret, err)
	}
	key := sub.Spec.SecretRef.Key
	if key == "" {
		key = DefaultSecretKey
	}
	val, ok := secret.Data[key]
	if !ok || len(val) == 0 {
		return nil, fmt.Errorf("%w: the Secret has no key %s", errSigningSecret, strconv.Quote(key))
	}
	wh, err := standardwebhooks.NewWebhook(string(val))
	if err != nil {
		return nil, fmt.Errorf("%w: not whsec_ + base64", errSigningSecret)
	}
	return wh, nil
}

// forgetRetries drops the retry state of events no outbox holds any more (delivered by a
// previous leader, removed with their object), so that memory stays bounded by the pending
// events.
func (d *Deliverer) forgetRetries(items []item) {
	pending := make(map[string]bool, len(items))
	for i := range items {
		pending[items[i].ev.ID] = true
	}
	d.mu.Lock()
	states := make([]*subState, 0, len(d.subs))
	for _, st := range d.subs {
		states = append(states, st)
	}
	d.mu.Unlock()
	for _, st := range states {
		st.mu.Lock()
		for id := range st.retries {
			if !pending[id] {
				delete(st.retries, id)
			}
		}
		st.mu.Unlock()
	}
}

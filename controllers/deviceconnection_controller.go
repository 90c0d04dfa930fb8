package controllers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kretry "k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers/metadata"
	"github.com/flexsite/flexsite/internal/deviceauth"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/shards"
	"github.com/flexsite/flexsite/internal/statuswrites"
)

// DeviceConnectionReconciler keeps a device connection's authorisation alive: it refreshes
// the access token at about 80 % of its lifetime (keeping the provider's refresh-token
// rotation), retries a transient failure with backoff without changing anything visible
// while the token is still valid, and moves the connection to NeedsReauthorisation on
// invalid_grant or an expired token it cannot refresh. The tokens live in the connection's
// Secret (internal/deviceauth); status holds only the phase and times.
//
// One refresh at a time: the controller runs in the leader only, and before it calls the
// provider it takes a claim in the Secret with an optimistic write (the Secret's
// resourceVersion), so a second writer (a replica that still believes it leads, a restart
// racing a failover) loses the write and never calls.
//
// Refresh-token rotation makes the provider's answer the only copy of a working grant: the old
// refresh token is invalid from then on, and using it again revokes the grant at most providers.
// So once the claim is taken, the call and the store of its answer run to the end even when
// the reconcile's context ends (a shutdown, a lost leadership), bounded by their own
// deadlines, and the store is the first thing done with the answer: retried with backoff
// on any failure until the Secret holds it, before the status or anything else is written.
// Until then the Secret keeps the previous token and the claim, so no other writer calls the
// provider with a token that may be rotated away. Only when the store's deadline passes too
// are the tokens kept in memory, to be written before anything else on the next reconcile.
// Memory dies with the process: so before the Secret store the answer is also handed over in
// PostgreSQL, sealed with a key the claim wrote into the Secret (deviceconnection_handover.go),
// and a refresh that finds a claim whose holder is gone stores that hand-over instead of
// calling the provider with the rotated-away token.
//
// Deletion (a DELETE of the connection, the offboarding of its site) revokes the tokens at
// the provider where it can (RFC 7009) and deletes the Secret before the finalizer goes.
type DeviceConnectionReconciler struct {
	// Shard, when set, is the replica's part of the ring: only its objects are reconciled here.
	Shard *shards.Replica
	client.Client
	Recorder recorder.EventRecorder
	Dialer   deviceauth.Dialer
	Now      func() time.Time
	// Holder names this replica in refresh claims.
	Holder string
	// DB is Flexsite's PostgreSQL: refreshed tokens are handed over through it until the
	// Secret holds them (deviceconnection_handover.go). Required.
	DB *pgxpool.Pool

	written statuswrites.Writes
	mu      sync.Mutex
	// unsaved holds tokens a provider answered that could not be stored yet (the API server
	// failed the write): the provider has rotated the refresh token, so these are the only
	// ones that work. They are written before anything else is done with the connection.
	unsaved map[types.NamespacedName]deviceauth.Tokens
}

// +kubebuilder:rbac:groups=flexsite.io,resources=deviceconnections,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=deviceconnections/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=deviceproviders,verbs=get;list;watch
// +kubebuilder:rbac:groups="",namespace=flexsite-system,resources=secrets,verbs=get
// Device tokens Secrets: in organisation namespaces only (bootstrap.OrganisationAccess).

// revokeGiveUp is how long a deletion keeps retrying a revocation the provider does not
// answer before it deletes the tokens anyway (logged).
const revokeGiveUp = 2 * time.Minute

// claimTTL is how long a refresh claim holds: past it, another writer may take it over.
const claimTTL = 3 * deviceauth.Timeout

// storeGiveUp bounds how long the tokens a provider answered are retried into the Secret
// before they are kept in memory only. It is shorter than claimTTL less the provider call, so
// that the claim still holds while the store is retried: no other writer uses the previous
// refresh token meanwhile.
const storeGiveUp = claimTTL - deviceauth.Timeout - 2*time.Second

// storeBackoff spaces the store's retries: 100 ms doubling to 2 s, then every 2 s.
var storeBackoff = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Cap: 2 * time.Second, Steps: math.MaxInt32}

// refreshRetryFirst and refreshRetryMax space the attempts of a refresh that keeps failing
// transiently while the token is valid: 1 s doubling to 5 min, per connection, by the
// controller's workqueue rate limiter (refreshRateLimiter). Its count of failures in a row
// lives in the process, not in status (writing it would change what is visible) nor in the
// Secret (a write per failure): a restart starts again at 1 s, which costs the provider one
// early call per connection that is failing at that moment.
const (
	refreshRetryFirst = time.Second
	refreshRetryMax   = 5 * time.Minute
)

// refreshRateLimiter is the DeviceConnection controller's workqueue rate limiter: what an
// error of this controller retries after, first of all a transient refresh failure. Other
// errors (the API server's) wait as long: a provider is never called again at the default's
// 5 ms, and a conflict is requeued by its watch event anyway.
func refreshRateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](refreshRetryFirst, refreshRetryMax)
}

// transientRefresh is a refresh that failed while the access token is still valid: nothing
// visible changes, and the workqueue's rate limiter spaces the next attempts.
type transientRefresh struct{ err error }

func (t *transientRefresh) Error() string {
	return "refresh failed; retrying while the token is valid: " + t.err.Error()
}
func (t *transientRefresh) Unwrap() error { return t.err }

// Reconcile fetches the connection, finalizes or refreshes it, and writes its status once.
func (r *DeviceConnectionReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	conn := &flexv1.DeviceConnection{}
	if done, res, err := r.written.Fetch(ctx, r.Client, req.NamespacedName, conn); done {
		return res, err
	}
	if !conn.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, conn)
	}
	if err := metadata.Ensure(ctx, r.Client, conn, true, false); err != nil {
		return ctrl.Result{RequeueAfter: conflictRetryDelay}, client.IgnoreNotFound(ignoreConflict(err))
	}
	base := conn.DeepCopy()
	next, quiet, err := r.reconcile(ctx, conn)
	if transient := (*transientRefresh)(nil); errors.As(err, &transient) {
		// Nothing visible changes; the error requeues the connection through the rate
		// limiter (refreshRateLimiter), whose count a reconcile that succeeds resets.
		return ctrl.Result{}, err
	}
	if quiet > 0 {
		// Someone else's claim, or a race lost: look again then, nothing visible changes.
		return ctrl.Result{RequeueAfter: quiet}, nil
	}
	res, err := summary{client: r.Client, recorder: r.Recorder, written: &r.written}.patch(ctx, base, conn,
		"Connected; the access token is kept fresh", err)
	if err == nil && res.RequeueAfter == 0 && next > 0 {
		res.RequeueAfter = next
	}
	return res, err
}

func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func (r *DeviceConnectionReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// reconcile computes the connection's status from its Secret, refreshing the token when due.
// It answers when to look again, or a quiet retry (nothing to write), and the outcome: a
// *transientRefresh is a failure that changes nothing visible.
func (r *DeviceConnectionReconciler) reconcile(ctx context.Context, conn *flexv1.DeviceConnection) (next, quiet time.Duration, err error) {
	sec := &corev1.Secret{}
	if err := r.Get(ctx, deviceauth.SecretKey(conn), sec); err != nil {
		if !apierrors.IsNotFound(err) {
			return 0, 0, err
		}
		sec = nil
	}
	t := deviceauth.Read(sec)
	now := r.now()
	canRefresh := conn.Spec.Provider != flexv1.ClientProvider
	if due := deviceauth.DueAt(t); canRefresh && sec != nil && !due.IsZero() && !now.Before(due) {
		fresh, lookAgain, rerr := r.refresh(ctx, conn, sec, t)
		switch {
		case lookAgain > 0:
			return 0, lookAgain, nil
		case rerr != nil && (t.Expiry.IsZero() || now.Before(t.Expiry)):
			return 0, 0, &transientRefresh{err: rerr}
		case rerr != nil:
			deviceauth.Status(conn, t, now)
			return 0, 0, rerr
		}
		t = fresh
		now = r.now()
	}
	deviceauth.Status(conn, t, now)
	switch conn.Status.Phase {
	case flexv1.ConnectionNeedsReauthorisation:
		return 0, 0, stalled(flexv1.ReasonNeedsReauthorisation,
			"The household must authorise again: "+invalidWords(t, canRefresh))
	case flexv1.ConnectionRevoked:
		return 0, 0, stalled(flexv1.ReasonRevoked, "The authorisation was revoked")
	case flexv1.ConnectionPending:
		msg := "Waiting for the household to authorise at the provider"
		if t.LastError != "" {
			msg += "; the last attempt failed: " + t.LastError
		}
		return 0, 0, waiting(0, flexv1.ReasonAwaitingAuthorisation, msg)
	}
	if due := deviceauth.DueAt(t); canRefresh && !due.IsZero() {
		next = max(due.Sub(now), time.Second)
	} else if !t.Expiry.IsZero() {
		next = max(t.Expiry.Sub(now), time.Second)
	}
	return next, 0, nil
}

func invalidWords(t deviceauth.Tokens, canRefresh bool) string {
	switch {
	case t.Invalid != "":
		return "the provider refused the refresh token (" + t.Invalid + ")"
	case !canRefresh:
		return "the token the client supplied has expired"
	}
	return "the access token has expired and there is no refresh token"
}

// refresh claims the refresh, calls the provider and stores what it answers. wait > 0: the
// claim is someone else's (or was just lost): look again then.
func (r *DeviceConnectionReconciler) refresh(ctx context.Context, conn *flexv1.DeviceConnection, sec *corev1.Secret,
	t deviceauth.Tokens) (deviceauth.Tokens, time.Duration, error) {
	now := r.now()
	if out, ok := r.takeUnsaved(conn); ok {
		written, err := r.storeAnswered(ctx, sec, &out)
		if err != nil {
			r.keepUnsaved(conn, out)
			return t, 0, err
		}
		if written {
			return out, 0, nil
		}
	}
	if holder, until := parseClaim(sec.Data[deviceauth.KeyRefreshClaim]); holder != "" && holder != r.Holder && now.Before(until) {
		return t, max(until.Sub(now), conflictRetryDelay), nil
	}
	// A refresh whose claim is still in the Secret (its holder died, or this replica lost
	// its memory) may have obtained tokens it could not store: the provider has rotated the
	// refresh token the Secret holds, so those tokens, not a new call, continue the grant.
	if out, ok := r.handedOver(ctx, conn, sec); ok {
		written, err := r.storeAnswered(ctx, sec, &out)
		if err != nil {
			return t, 0, err
		}
		r.forgetHandover(ctx, conn)
		if written {
			ctrl.LoggerFrom(ctx).Info("stored the tokens an interrupted refresh had handed over")
			return out, 0, nil
		}
		return t, conflictRetryDelay, nil
	}
	prov, err := r.Dialer.Load(ctx, r.Client, conn.Spec.Provider)
	if err != nil {
		return t, 0, err
	}
	if prov == nil {
		return t, 0, fmt.Errorf("provider %q is not in the catalogue", conn.Spec.Provider)
	}
	claimed := sec.DeepCopy()
	claimed.Data[deviceauth.KeyRefreshClaim] = []byte(r.Holder + " " + now.Add(claimTTL).UTC().Format(time.RFC3339Nano))
	claimed.Data[deviceauth.KeyHandoverKey] = deviceauth.NewHandoverKey()
	if err := r.Update(ctx, claimed); err != nil {
		if apierrors.IsConflict(err) {
			// Another writer changed the Secret first: it refreshes, not us.
			return t, conflictRetryDelay, nil
		}
		return t, 0, err
	}
	// From here the provider may rotate the refresh token: the call is not abandoned halfway
	// when ctx ends (its answer would be lost), only bounded by its own timeout.
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deviceauth.Timeout)
	tok, err := prov.Refresh(callCtx, t.RefreshToken)
	cancel()
	var out deviceauth.Tokens
	switch {
	case errors.Is(err, deviceauth.ErrInvalidGrant):
		out = t
		out.Invalid = "invalid_grant"
	case err != nil:
		// Release the claim (best effort: it also expires).
		_, _ = r.writeTokens(ctx, claimed, nil)
		return t, 0, err
	default:
		out = deviceauth.FromOAuth(tok, t.RefreshToken, r.now())
		out.ConnectedAt, out.RefreshedAt = t.ConnectedAt, r.now()
		r.handOver(ctx, conn, claimed, out)
	}
	written, err := r.storeAnswered(ctx, claimed, &out)
	switch {
	case err != nil:
		r.keepUnsaved(conn, out)
		return t, 0, err
	case !written:
		// A newer grant is stored: look again at it.
		r.forgetHandover(ctx, conn)
		return t, conflictRetryDelay, nil
	}
	r.forgetHandover(ctx, conn)
	return out, 0, nil
}

// storeAnswered stores tokens a provider answered: retried with backoff on any failure until
// stored, or the Secret is gone (the connection was deleted: the tokens belong to nothing), or
// storeGiveUp has passed. It runs on when ctx ends (a shutdown waits for it): the answer is
// the only copy of the grant.
func (r *DeviceConnectionReconciler) storeAnswered(ctx context.Context, sec *corev1.Secret, t *deviceauth.Tokens) (bool, error) {
	storeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeGiveUp)
	defer cancel()
	var written bool
	var err error
	// A DelayFunc keeps retrying at the cap until storeCtx ends (a Backoff's Steps would stop it).
	_ = storeBackoff.DelayFunc().Until(storeCtx, true, true, func(context.Context) (bool, error) {
		written, err = r.writeTokens(storeCtx, sec, t)
		if err == nil || apierrors.IsNotFound(err) {
			return true, nil
		}
		ctrl.LoggerFrom(ctx).Info("storing the tokens the provider answered failed; retrying", "reason", err.Error())
		return false, nil
	})
	if err != nil {
		return false, err
	}
	return written, nil
}

// writeTokens stores t (nil: only releases the claim) in the Secret, retried from a fresh
// read on a conflict: tokens just obtained are never dropped while the Secret still holds the
// grant they came from. When the Secret holds another grant by then (the household
// reconnected, or the client stored a token, meanwhile), that newer grant wins and t is
// dropped: it belongs to the grant the household replaced.
func (r *DeviceConnectionReconciler) writeTokens(ctx context.Context, sec *corev1.Secret, t *deviceauth.Tokens) (bool, error) {
	used := string(sec.Data[deviceauth.KeyRefreshToken])
	cur := sec.DeepCopy()
	replaced := false
	err := kretry.RetryOnConflict(kretry.DefaultBackoff, func() error {
		// A write that failed may have been applied all the same (a timeout): finding its
		// tokens stored is not a newer grant.
		if stored := string(cur.Data[deviceauth.KeyRefreshToken]); stored != used && (t == nil || stored != t.RefreshToken) {
			ctrl.LoggerFrom(ctx).Info("the connection was authorised again meanwhile; keeping the newer grant")
			replaced = true
			return nil
		}
		if t != nil {
			deviceauth.Write(cur, *t)
		}
		delete(cur.Data, deviceauth.KeyRefreshClaim)
		delete(cur.Data, deviceauth.KeyHandoverKey)
		err := r.Update(ctx, cur)
		if apierrors.IsConflict(err) {
			fresh := &corev1.Secret{}
			if gerr := r.Get(ctx, client.ObjectKeyFromObject(sec), fresh); gerr != nil {
				return gerr
			}
			if fresh.Data == nil {
				fresh.Data = map[string][]byte{}
			}
			cur = fresh
		}
		return err
	})
	return !replaced && err == nil, err
}

func parseClaim(b []byte) (string, time.Time) {
	holder, until, ok := strings.Cut(string(b), " ")
	if !ok {
		return "", time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, until)
	return holder, t
}

func (r *DeviceConnectionReconciler) keepUnsaved(conn *flexv1.DeviceConnection, t deviceauth.Tokens) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unsaved == nil {
		r.unsaved = map[types.NamespacedName]deviceauth.Tokens{}
	}
	r.unsaved[client.ObjectKeyFromObject(conn)] = t
}

func (r *DeviceConnectionReconciler) takeUnsaved(conn *flexv1.DeviceConnection) (deviceauth.Tokens, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := client.ObjectKeyFromObject(conn)
	t, ok := r.unsaved[key]
	delete(r.unsaved, key)
	return t, ok
}

// finalize revokes the tokens at the provider where it can, deletes the Secret and lets the
// connection go.
func (r *DeviceConnectionReconciler) finalize(ctx context.Context, conn *flexv1.DeviceConnection) error {
	if !controllerutil.ContainsFinalizer(conn, flexv1.Finalizer) {
		return nil
	}
	sec := &corev1.Secret{}
	err := r.Get(ctx, deviceauth.SecretKey(conn), sec)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		if t := deviceauth.Read(sec); t.Has() && conn.Spec.Provider != flexv1.ClientProvider {
			if rerr := r.revoke(ctx, conn, t); rerr != nil {
				if r.now().Sub(conn.DeletionTimestamp.Time) < revokeGiveUp {
					return rerr
				}
				ctrl.LoggerFrom(ctx).Info("giving up revoking at the provider; deleting the tokens", "reason", rerr.Error())
			}
		}
		if err := r.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	r.forgetHandover(ctx, conn)
	return metadata.RemoveFinalizer(ctx, r.Client, conn)
}

func (r *DeviceConnectionReconciler) revoke(ctx context.Context, conn *flexv1.DeviceConnection, t deviceauth.Tokens) error {
	prov, err := r.Dialer.Load(ctx, r.Client, conn.Spec.Provider)
	if err != nil || prov == nil {
		return err // a provider gone from the catalogue: nothing to revoke at
	}
	callCtx, cancel := context.WithTimeout(ctx, deviceauth.Timeout)
	defer cancel()
	return prov.RevokeAll(callCtx, t)
}

// SetupWithManager watches DeviceConnections (every change: the use cases write their
// status when they store tokens).
func (r *DeviceConnectionReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.DB == nil {
		return errNoDatabase
	}
	// One HTTP client per provider for every refresh and revocation (connections reused).
	r.Dialer = r.Dialer.Pooled()
	if opts.RateLimiter == nil {
		opts.RateLimiter = refreshRateLimiter()
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&flexv1.DeviceConnection{}, builder.WithPredicates(r.Shard.For())).
		Named("deviceconnection").
		WithOptions(opts).
		Complete(r.Shard.Sharded("deviceconnection", &flexv1.DeviceConnection{}, mgr.GetClient(), r))
}

// assetsOfConnection maps a connection to its site's assets (their needsReauthorisation).
func assetsOfConnection(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []ctrl.Request {
		conn, ok := obj.(*flexv1.DeviceConnection)
		if !ok {
			return nil
		}
		site := &flexv1.Site{}
		site.Namespace, site.Name = conn.Namespace, conn.Spec.SiteName
		return childrenOf(ctx, index.NewLookup(c).AssetsOfSite, site)
	}
}

package controllers

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// RewardLedgerReconciler tells the transactions added to a site's reward ledger
// (rewards.transaction_credited). A rewards system writes the ledger's spec; this reconciler's
// status write both advances status.lastCreditedID past the new transactions and records
// their events, so a transaction is told once, and never lost between the two. It is the one
// notification whose event rides in a write of its own: the ledger's spec write is the
// rewards system's, and its status had nothing to write before. It writes only while a
// subscription of the organisation asks for rewards events; a ledger it has not marked yet
// has all its transactions told (the outbox keeps the newest 16).
type RewardLedgerReconciler struct {
	client.Client
	// APIReader reads a ledger whole: the cache keeps ledgers without their transactions.
	APIReader client.Reader
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// Store is the reward ledger in PostgreSQL: with it, the spec's transactions are ingested
	// into the database, the ledger's status summarises the history there, and credits are
	// told from the database's outbox. Without it (no database), transactions are told from
	// the spec as before.
	Store *rewardstore.Store
	// Recorder tells, as Warning Events, what a ledger's spec asked that was refused (nil: not told).
	Recorder recorder.EventRecorder
}

// +kubebuilder:rbac:groups=flexsite.io,resources=rewardledgers,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=flexsite.io,resources=rewardledgers/status,verbs=get;update;patch

// Reconcile records the events of the transactions after status.lastCreditedID.
func (r *RewardLedgerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if r.Store != nil {
		return r.reconcileWithStore(ctx, req)
	}
	cached := &flexv1.RewardLedger{}
	if err := r.Get(ctx, req.NamespacedName, cached); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !cached.DeletionTimestamp.IsZero() || cached.Status.ObservedGeneration == cached.Generation {
		return ctrl.Result{}, nil // nothing new since the transactions were last told
	}
	// Nothing is written for an organisation that no subscription asks rewards events of: its
	// ledgers' writers (which may update with a resourceVersion) see no status writes at all.
	// Asked before the ledger is read whole, so that such ledgers cost no API read either.
	subs, err := subscriptionsIn(ctx, r.Client, cached.Namespace)
	if err != nil || !events.AnyWants(subs, flexv1.EventRewardsTransactionCredited) {
		return ctrl.Result{}, err
	}
	ledger := &flexv1.RewardLedger{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, ledger); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	txs, last := events.CreditedTransactions(ledger)
	if last == ledger.Status.LastCreditedID && ledger.Status.ObservedGeneration == ledger.Generation {
		return ctrl.Result{}, nil
	}
	base := ledger.DeepCopy()
	siteID, err := siteIDOf(ctx, r.Client, ledger.Namespace, ledger.Spec.SiteName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := recordEvents(ctx, r.Client, ledger, events.LedgerEvents(txs, siteID), r.Now()); err != nil {
		return ctrl.Result{}, err
	}
	ledger.Status.LastCreditedID = last
	ledger.Status.ObservedGeneration = ledger.Generation
	err = r.Status().Patch(ctx, ledger, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRetryDelay}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(err)
}

// SetupWithManager watches RewardLedgers' spec.
func (r *RewardLedgerReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&flexv1.RewardLedger{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("rewardledger").
		WithOptions(opts)
	if r.Store != nil {
		// Commits that change a site's history (REST, withdrawals, settlement) are told by
		// PostgreSQL's NOTIFY; a ledger whose status outbox empties may have more to hand over.
		changes := make(chan event.GenericEvent, 1024)
		if err := mgr.Add(leaderRunnable(r.listenChanges(changes))); err != nil {
			return err
		}
		b = b.WatchesRawSource(source.Channel(changes, &handler.EnqueueRequestForObject{}))
	}
	return b.Complete(r)
}

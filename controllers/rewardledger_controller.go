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
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/rewardstore"
	"github.com/flexsite/flexsite/internal/shards"
)

// RewardLedgerReconciler ingests the transactions a rewards system writes into a
// RewardLedger's spec into the reward history in PostgreSQL, and summarises that history into
// the ledger's status. Credits are told from the outbox they were written to with the credit,
// in one SQL transaction (internal/rewardstore); nothing about them passes through the
// ledger's status.
type RewardLedgerReconciler struct {
	// Shard, when set, is the replica's part of the ring: only its objects are reconciled here.
	Shard *shards.Replica
	client.Client
	// APIReader reads a ledger whole: the cache keeps ledgers without their transactions.
	APIReader client.Reader
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// Store is the reward ledger in PostgreSQL (required).
	Store *rewardstore.Store
	// Recorder tells, as Warning Events, what a ledger's spec asked that was refused (nil: not told).
	Recorder recorder.EventRecorder
}

// +kubebuilder:rbac:groups=flexsite.io,resources=rewardledgers,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=flexsite.io,resources=rewardledgers/status,verbs=get;update;patch

// Reconcile ingests the ledger's transactions and writes the summary of the site's history.
func (r *RewardLedgerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.reconcileWithStore(ctx, req)
}

// SetupWithManager watches RewardLedgers' spec.
func (r *RewardLedgerReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Store == nil {
		return errNoDatabase
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	// Commits that change a site's history (REST, withdrawals, settlement) are told by
	// PostgreSQL's NOTIFY.
	changes := make(chan event.GenericEvent, 1024)
	if err := mgr.Add(leaderRunnable(r.listenChanges(changes))); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&flexv1.RewardLedger{}, builder.WithPredicates(r.Shard.For(predicate.GenerationChangedPredicate{}))).
		Named("rewardledger").
		WithOptions(opts).
		WatchesRawSource(source.Channel(changes, &handler.EnqueueRequestForObject{})).
		Complete(r.sharded(mgr.GetClient()))
}

// sharded is the reconciler as a shard runs it (as it is, without shards). A ledger yet to be
// made for a site's history (createForHistory) has no shard label to go by: the shard of the
// site it is named after makes it.
func (r *RewardLedgerReconciler) sharded(c client.Client) reconcile.Reconciler {
	wrapped := r.Shard.Sharded("rewardledger", &flexv1.RewardLedger{}, c, r)
	if r.Shard == nil {
		return wrapped
	}
	return reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		if err := r.Get(ctx, req.NamespacedName, &flexv1.RewardLedger{}); !apierrors.IsNotFound(err) {
			return wrapped.Reconcile(ctx, req)
		}
		site := &flexv1.Site{}
		if err := r.Get(ctx, req.NamespacedName, site); err != nil || !r.Shard.Mine(site) {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		return r.Reconcile(ctx, req)
	})
}

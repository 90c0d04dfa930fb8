package controllers

import (
	"context"
	"errors"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/record"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// recentTransactions is how many transactions a ledger's status shows.
const recentTransactions = 10

// reconcileWithStore runs a ledger against the database: it ingests the spec's transactions
// (once, by id; a credit's event is written with it, to the outbox internal/delivery delivers
// from), and writes the summary of the history.
func (r *RewardLedgerReconciler) reconcileWithStore(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ledger := &flexv1.RewardLedger{}
	err := r.APIReader.Get(ctx, req.NamespacedName, ledger)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.createForHistory(ctx, req)
	}
	if err != nil || !ledger.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, err
	}
	site := &flexv1.Site{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: ledger.Namespace, Name: ledger.Spec.SiteName}, site); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // the site comes, or the ledger goes with it
	}
	key := rewardstore.Site{Namespace: ledger.Namespace, ID: site.Labels[flexv1.IDLabel]}
	if key.ID == "" {
		return ctrl.Result{}, nil
	}
	base := ledger.DeepCopy()
	status := &ledger.Status

	if status.ObservedGeneration != ledger.Generation || !meta.IsStatusConditionTrue(status.Conditions, flexv1.IngestedCondition) {
		refused, steps, err := r.ingest(ctx, ledger, key)
		if err != nil {
			return r.unavailable(ctx, ledger, base, err)
		}
		meta.SetStatusCondition(&status.Conditions, household.IngestedCondition(ledger.Generation, refused, steps))
		status.ObservedGeneration = ledger.Generation
	}

	// The summary is a copy of the database's figures (its balance is the one SQL sum), read
	// in one snapshot with the revision they hold.
	summary, err := r.Store.Summary(ctx, key, recentTransactions)
	if err != nil {
		return r.unavailable(ctx, ledger, base, err)
	}
	summarise(status, summary)

	if !equality.Semantic.DeepEqual(base.Status, ledger.Status) {
		err := r.Status().Patch(ctx, ledger, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: conflictRetryDelay}, nil
		}
		if err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		r.warnRefusals(base, ledger)
	}
	return ctrl.Result{}, nil
}

// unavailable records that the database could not be reached (when that is what failed) and
// answers the error, so that the ledger is tried again with backoff.
func (r *RewardLedgerReconciler) unavailable(ctx context.Context, ledger, base *flexv1.RewardLedger, err error) (ctrl.Result, error) {
	if db.Unavailable(err) && meta.IsStatusConditionTrue(ledger.Status.Conditions, flexv1.IngestedCondition) {
		ledger.Status = *base.Status.DeepCopy()
		meta.SetStatusCondition(&ledger.Status.Conditions, metav1.Condition{Type: flexv1.IngestedCondition,
			Status: metav1.ConditionUnknown, Reason: flexv1.ReasonDatabaseUnavailable, ObservedGeneration: ledger.Generation,
			Message: "The database is unavailable; the ledger is tried again"})
		_ = r.Status().Patch(ctx, ledger, client.MergeFrom(base))
	}
	return ctrl.Result{}, err
}

// ingest stores every transaction of the spec, once; it answers the ids refused (stored with
// other fields). A withdrawal whose paymentStatus alone changed has the change recorded when
// the payment's state machine allows the step from its current status; the steps it refuses
// are answered too (id and reason), and change nothing.
func (r *RewardLedgerReconciler) ingest(ctx context.Context, ledger *flexv1.RewardLedger, key rewardstore.Site) (
	refused, steps []string, err error) {
	actor := "RewardLedger " + ledger.Namespace + "/" + ledger.Name
	// An earlier version told the credits up to status.lastCreditedID from the spec: those
	// are imported without telling them again.
	told := slices.IndexFunc(ledger.Spec.Transactions, func(tx flexv1.RewardTransaction) bool {
		return tx.ID == ledger.Status.LastCreditedID
	})
	for i, tx := range ledger.Spec.Transactions {
		add := r.Store.Append
		if i <= told {
			add = r.Store.Import
		}
		_, _, err := add(ctx, key, tx, rewardstore.SourceLedgerSpec)
		if !errors.Is(err, rewardstore.ErrConflict) {
			if err != nil {
				return nil, nil, err
			}
			continue
		}
		stored, getErr := r.Store.Get(ctx, key, tx.ID)
		if getErr != nil && !errors.Is(getErr, db.ErrNotFound) {
			return nil, nil, getErr
		}
		if getErr == nil && tx.Type == household.TransactionWithdrawal && tx.PaymentStatus != "" && sameBut(stored, tx) {
			if stored.PaymentStatus == tx.PaymentStatus {
				continue // recorded already (a spec ingested again)
			}
			_, err := r.Store.SetPaymentStatus(ctx, key, tx.ID, tx.PaymentStatus, actor)
			var step *household.PaymentChangeRefused
			switch {
			case errors.As(err, &step):
				steps = append(steps, tx.ID+": "+step.Error())
			case err != nil:
				return nil, nil, err
			}
			continue
		}
		refused = append(refused, tx.ID)
	}
	return refused, steps, nil
}

// warnRefusals tells, as a Warning Event on the ledger, what its spec asked that was refused,
// once: when the Ingested condition written (ledger's) says something base's did not.
func (r *RewardLedgerReconciler) warnRefusals(base, ledger *flexv1.RewardLedger) {
	after := meta.FindStatusCondition(ledger.Status.Conditions, flexv1.IngestedCondition)
	if r.Recorder == nil || after == nil ||
		(after.Reason != flexv1.ReasonTransactionRefused && after.Reason != flexv1.ReasonPaymentStatusRefused) {
		return
	}
	if before := meta.FindStatusCondition(base.Status.Conditions, flexv1.IngestedCondition); before != nil &&
		before.Reason == after.Reason && before.Message == after.Message {
		return
	}
	r.Recorder.Eventf(ledger, nil, corev1.EventTypeWarning, after.Reason, "Ingest", "%s", after.Message)
}

// sameBut reports whether two transactions differ at most in their payment status.
func sameBut(a, b flexv1.RewardTransaction) bool {
	a.PaymentStatus, b.PaymentStatus = "", ""
	return equality.Semantic.DeepEqual(record.TransactionOf(&a), record.TransactionOf(&b))
}

// summarise copies the database's summary of a site's history into a ledger's status.
func summarise(status *flexv1.RewardLedgerStatus, summary rewardstore.Summary) {
	b := summary.Balance
	status.BalancePence, status.TotalEarnedPence = ptr.To(b.Current), ptr.To(b.Earnings)
	status.FirstRewardedAt = household.WholeSeconds(b.FirstReward)
	status.HistoryRevision = ptr.To(summary.Revision)
	status.TransactionCount = ptr.To(summary.Count)
	status.RecentTransactions = nil
	for _, tx := range summary.Recent {
		brief := flexv1.RecentTransaction{ID: tx.ID, Type: tx.Type, CreditPence: tx.CreditPence, PaymentStatus: tx.PaymentStatus}
		if at := household.TransactionTime(tx); !at.IsZero() {
			brief.At = &metav1.Time{Time: at}
		}
		status.RecentTransactions = append(status.RecentTransactions, brief)
	}
	status.LastCredited = household.WholeSeconds(summary.LastCredited)
}

// createForHistory creates the RewardLedger of a site that has history in the database but no
// ledger (credited over REST or by settlement), so that its summary has somewhere to go.
func (r *RewardLedgerReconciler) createForHistory(ctx context.Context, req ctrl.Request) error {
	site := &flexv1.Site{}
	if err := r.Get(ctx, req.NamespacedName, site); err != nil || !site.DeletionTimestamp.IsZero() {
		return client.IgnoreNotFound(err)
	}
	key := rewardstore.Site{Namespace: site.Namespace, ID: site.Labels[flexv1.IDLabel]}
	history, err := r.Store.Page(ctx, key, rewardstore.Page{Limit: 1})
	if err != nil || len(history) == 0 {
		return err
	}
	ledger := &flexv1.RewardLedger{ObjectMeta: metav1.ObjectMeta{Namespace: site.Namespace, Name: req.Name},
		Spec: flexv1.RewardLedgerSpec{SiteName: site.Name}}
	household.ControlledBy(ledger, site) // on its site's shard from the start
	return client.IgnoreAlreadyExists(r.Create(ctx, ledger, client.FieldOwner("flexsite-rewardledger-controller")))
}

// listenChanges feeds ch with the ledgers a commit changed (PostgreSQL NOTIFY), and every
// ledger, and the ledger of every site with history, after the connection was lost and found
// again. The bridge finds a site's ledger off the listening goroutine.
func (r *RewardLedgerReconciler) listenChanges(ch chan<- event.GenericEvent) func(context.Context) error {
	// The ledger of a site is named after the site (identity.RewardLedgerName).
	bySiteID := func(ctx context.Context, key types.NamespacedName) []client.Object {
		sites, err := index.NewLookup(r.Client).SitesByID(ctx, key.Namespace, key.Name)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "finding the site of a ledger change", "namespace", key.Namespace, "site", key.Name)
			return nil
		}
		objs := make([]client.Object, 0, len(sites))
		for _, site := range sites {
			objs = append(objs, &flexv1.RewardLedger{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace,
				Name: identity.RewardLedgerName(site.Name)}})
		}
		return objs
	}
	return bridge(ch, func(ctx context.Context, changes *db.Changes[types.NamespacedName]) {
		_ = rewardstore.Watch(ctx, r.Store.Pool, func(namespace, siteID string) {
			changes.Note(types.NamespacedName{Namespace: namespace, Name: siteID})
		}, func(reconnected bool) {
			if reconnected { // the first time, the controller's first list reconciles every ledger anyway
				changes.Resync()
			}
		}, nil)
	}, bridgeTargets{of: bySiteID, all: func(ctx context.Context) []client.Object {
		log := ctrl.LoggerFrom(ctx)
		list := &flexv1.RewardLedgerList{}
		if err := r.List(ctx, list); err != nil {
			log.Error(err, "listing ledgers to resync after the database came back")
			return nil
		}
		objs := make([]client.Object, 0, len(list.Items))
		for i := range list.Items {
			objs = append(objs, &list.Items[i])
		}
		// And every site with history: one credited for the first time while nothing
		// listened has no ledger to list yet (createForHistory makes it).
		sites, err := r.Store.SitesWithHistory(ctx)
		if err != nil {
			log.Error(err, "listing the sites with reward history to resync after the database came back")
			return objs
		}
		for _, site := range sites {
			objs = append(objs, bySiteID(ctx, types.NamespacedName{Namespace: site.Namespace, Name: site.ID})...)
		}
		return objs
	}})
}

// leaderRunnable is a function the manager runs on the leader only.
type leaderRunnable func(context.Context) error

func (f leaderRunnable) Start(ctx context.Context) error { return f(ctx) }
func (leaderRunnable) NeedLeaderElection() bool          { return true }

package shards

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	shardcontroller "github.com/timebertt/kubernetes-controller-sharding/pkg/shard/controller"
	shardlease "github.com/timebertt/kubernetes-controller-sharding/pkg/shard/lease"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/flexsite/flexsite/internal/identity"
)

// Options make a replica a shard of the ring.
type Options struct {
	// Shard names this replica: its shard lease's name and holder (the pod's name).
	Shard string
	// Namespace holds the shard leases and the leader lease (the manager's own).
	Namespace string
	// LeaderElectionID, when set, is the lease that organisation-wide work runs under, one
	// replica at a time (cmd/manager's --leader-elect). Unset: it runs on every replica, which
	// is right for one replica only.
	LeaderElectionID string
	// PerSiteOnly makes the replica a shard of the controller tier (cmd/manager's
	// --tier=controllers): it does no organisation-wide work (the API tier does, under
	// LeaderElectionID) and never seeks that lease; it only reads it, to wait before reconciling
	// sites while a replica without shards holds it (waitForShardedLeader). Replica.OrgWide is
	// then nil.
	PerSiteOnly bool
	// Timing of both leases (zero: DefaultTiming).
	Timing Timing
	// KeepLeasesOnStop leaves the leases held when the manager stops, as a crash does (tests);
	// a replica normally hands them over at once.
	KeepLeasesOnStop bool
	// Observe, when set, is told of every reconcile a sharded reconciler runs, and the
	// returned func when it ends (test/sharding records overlaps with it).
	Observe func(shard, controller string, req reconcile.Request) (done func())
}

// Replica is one replica's part in the ring: the manager its per-site reconcilers go to (run
// under its shard lease) and the one organisation-wide work goes to (under the leader lease).
// A nil *Replica is an install without shards: every method then passes everything through.
type Replica struct {
	// Name is the shard's name.
	Name string
	// PerSite runs what is added to it while the replica holds its shard lease.
	PerSite manager.Manager
	// OrgWide runs what needs a leader while the replica holds the leader lease (nil in the
	// controller tier, Options.PerSiteOnly: it runs no organisation-wide work).
	OrgWide manager.Manager
	observe func(shard, controller string, req reconcile.Request) func()
}

// Join makes mgr a shard of the ring. mgr must be built without leader election: the replica
// holds its two leases itself.
func Join(mgr manager.Manager, o Options) (*Replica, error) {
	if o.Shard == "" || o.Namespace == "" {
		return nil, errors.New("shards: a shard needs a name and the namespace of its lease")
	}
	if o.Timing == (Timing{}) {
		o.Timing = DefaultTiming
	}
	shardLock, err := shardlease.NewResourceLock(rest.CopyConfig(mgr.GetConfig()), shardlease.Options{
		ControllerRingName: RingName, LeaseNamespace: o.Namespace, ShardName: o.Shard})
	if err != nil {
		return nil, fmt.Errorf("shards: the shard lease: %w", err)
	}
	var leaderLock resourcelock.Interface
	if o.LeaderElectionID != "" {
		// A holder's identity is unique per process, as controller-runtime makes it: a replica
		// restarted under the same name must not take for its own a lease its old self held.
		if leaderLock, err = LeaderLease(mgr.GetConfig(), o.Namespace, o.LeaderElectionID,
			shardedHolderPrefix+o.Shard+"_"+identity.NewID()); err != nil {
			return nil, err
		}
	}
	shard := newElected("shard "+o.Shard, shardLock, o.Timing, !o.KeepLeasesOnStop)
	if leaderLock != nil {
		shard.first = waitForShardedLeader(leaderLock, o.Timing.RetryPeriod)
	}
	if err := mgr.Add(shard); err != nil {
		return nil, err
	}
	replica := &Replica{Name: o.Shard, PerSite: grouped{Manager: mgr, group: shard}, observe: o.Observe}
	if o.PerSiteOnly {
		return replica, nil
	}
	leader := newElected("leader", leaderLock, o.Timing, !o.KeepLeasesOnStop)
	if err := mgr.Add(leader); err != nil {
		return nil, err
	}
	replica.OrgWide = grouped{Manager: mgr, group: leader}
	return replica, nil
}

// shardedHolderPrefix marks the leader lease's holder as a replica with shards.
const shardedHolderPrefix = "shard/"

// APIHolderPrefix marks the leader lease's holder as a replica of the API tier, which runs no
// per-site reconciler: the controller tier's shards reconcile beside it.
const APIHolderPrefix = "api/"

// APITierLease is the leader lease as an API tier replica named name holds it (the manager's
// LeaderElectionResourceLockInterface): its holder identity, unique per process as
// controller-runtime makes it, says it is the API tier's, so that the controller tier's
// shards reconcile beside it (waitForShardedLeader).
func APITierLease(cfg *rest.Config, namespace, id, name string) (resourcelock.Interface, error) {
	return LeaderLease(cfg, namespace, id, APIHolderPrefix+name+"_"+identity.NewID())
}

// LeaderLease is the lease namespace/id held as holder.
func LeaderLease(cfg *rest.Config, namespace, id, holder string) (resourcelock.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	rest.AddUserAgent(cfg, "leader-election")
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("shards: the leader lease: %w", err)
	}
	return &resourcelock.LeaseLock{LeaseMeta: metav1.ObjectMeta{Namespace: namespace, Name: id},
		Client: coordination, LockConfig: resourcelock.ResourceLockConfig{Identity: holder}}, nil
}

// waitForShardedLeader holds the per-site work back while the leader lease is held, and
// renewed, by a replica without shards: one of an install being switched to shards, which
// runs every per-site reconciler itself until its rollout ends. Reconciling beside it would
// be two replicas on one site. A holder with shards, or of the API tier (which runs no
// per-site reconciler), is no reason to wait.
func waitForShardedLeader(lock resourcelock.Interface, retry time.Duration) func(context.Context) error {
	return func(ctx context.Context) error {
		logged := false
		for {
			record, _, err := lock.Get(ctx)
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case err == nil && (record.HolderIdentity == "" || strings.HasPrefix(record.HolderIdentity, shardedHolderPrefix) ||
				strings.HasPrefix(record.HolderIdentity, APIHolderPrefix) ||
				time.Since(record.RenewTime.Time) > time.Duration(record.LeaseDurationSeconds)*time.Second):
				return nil
			case err == nil && !logged:
				logf.FromContext(ctx).Info("waiting for the leader of the install without shards to go before reconciling sites",
					"lease", lock.Describe(), "holder", record.HolderIdentity)
				logged = true
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(retry):
			}
		}
	}
}

// Sharded wraps a per-site reconciler: it reconciles only what the sharder assigned to this
// shard, and acknowledges a drain (the sharder moving the object) by letting go of it.
func (r *Replica) Sharded(controller string, obj client.Object, c client.Client, do reconcile.Reconciler) reconcile.Reconciler {
	if r == nil {
		return do
	}
	if r.observe != nil {
		do = observed{shard: r.Name, controller: controller, observe: r.observe, do: do}
	}
	return &shardcontroller.Reconciler{Object: obj, Client: c, ControllerRingName: RingName, ShardName: r.Name, Do: do}
}

// For is the predicate of a per-site reconciler's own kind: the drains, and what is this
// shard's and passes preds.
func (r *Replica) For(preds ...predicate.Predicate) predicate.Predicate {
	if r == nil {
		return predicate.And(preds...)
	}
	return shardcontroller.Predicate(RingName, r.Name, preds...)
}

// Mine reports whether obj is this shard's to reconcile, or its parent's (every object is,
// without shards).
func (r *Replica) Mine(obj client.Object) bool { return r == nil || ShardOf(obj) == r.Name }

// MineOrUnassigned passes the events of this shard's objects and of those the sharder has not
// assigned yet: a child written without its controller reference is unassigned until its
// Site's reconciler adopts it, so its Site must still hear of it.
func (r *Replica) MineOrUnassigned() predicate.Predicate {
	return predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return r == nil || ShardOf(obj) == "" || ShardOf(obj) == r.Name
	})
}

// Selector narrows a list to this shard's objects (no option without shards).
func (r *Replica) Selector() []client.ListOption {
	if r == nil {
		return nil
	}
	return []client.ListOption{client.MatchingLabels{ShardLabel: r.Name}}
}

// observed tells Options.Observe of each reconcile.
type observed struct {
	shard, controller string
	observe           func(shard, controller string, req reconcile.Request) func()
	do                reconcile.Reconciler
}

func (o observed) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	done := o.observe(o.shard, o.controller, req)
	defer done()
	return o.do.Reconcile(ctx, req)
}

package shards

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Timing is a lease's timing, as controller-runtime's leader election has it.
type Timing struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// DefaultTiming is controller-runtime's leader election default.
var DefaultTiming = Timing{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}

// elected runs a group of runnables while it holds a lease (with no lease, from the start). A
// controller-runtime manager runs under one lock only; a replica of a sharded install needs two
// (its shard lease for per-site work, the leader lease for organisation-wide work), so each
// group is one runnable of the manager that needs no leader election itself.
//
// On losing the lease it stops its runnables and fails, which stops the manager and the
// process, as controller-runtime does when its leader lease is lost: work must never go on
// without the lease. On the manager's stop it stops its runnables first and then lets go of
// the lease (releaseOnCancel), so that the next holder never overlaps with work in flight.
type elected struct {
	name            string
	lock            resourcelock.Interface
	timing          Timing
	releaseOnCancel bool

	// first, when set, must return before the group seeks its lease (waitForShardedLeader).
	first func(context.Context) error

	mu        sync.Mutex
	runnables []manager.Runnable
	started   bool
	// leading is closed once the group holds its lease and has started its runnables.
	leading chan struct{}
}

func newElected(name string, lock resourcelock.Interface, timing Timing, releaseOnCancel bool) *elected {
	return &elected{name: name, lock: lock, timing: timing, releaseOnCancel: releaseOnCancel, leading: make(chan struct{})}
}

// errAddedLate refuses a runnable added once the group runs: it would run without the lease
// having been checked for it (every runnable is added before the manager starts).
var errAddedLate = errors.New("shards: a runnable was added after its lease group started")

func (e *elected) add(r manager.Runnable) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.started {
		return fmt.Errorf("%w (%s)", errAddedLate, e.name)
	}
	e.runnables = append(e.runnables, r)
	return nil
}

// NeedLeaderElection: the group holds its own lease.
func (e *elected) NeedLeaderElection() bool { return false }

// Start holds the lease and runs the group's runnables while it does.
func (e *elected) Start(ctx context.Context) error {
	e.mu.Lock()
	e.started = true
	e.mu.Unlock()
	if e.first != nil {
		if err := e.first(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	if e.lock == nil {
		close(e.leading)
		return e.run(ctx)
	}
	// The election has its own context, ended only once the runnables have stopped: a
	// release must come after the last reconcile, never during one.
	electionCtx, endElection := context.WithCancel(context.WithoutCancel(ctx))
	defer endElection()
	won := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: e.lock, Name: e.name, ReleaseOnCancel: e.releaseOnCancel,
		LeaseDuration: e.timing.LeaseDuration, RenewDeadline: e.timing.RenewDeadline, RetryPeriod: e.timing.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leading context.Context) { won <- leading },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return fmt.Errorf("%s: %w", e.name, err)
	}
	electionDone := make(chan struct{})
	go func() {
		defer close(electionDone)
		elector.Run(electionCtx)
	}()
	select {
	case <-ctx.Done():
		endElection()
		<-electionDone
		return nil
	case <-electionDone:
		// Run returns only when its context ends, and that is ours.
		return nil
	case leading := <-won:
		close(e.leading)
		runCtx, stop := context.WithCancel(ctx)
		defer stop()
		go func() {
			select {
			case <-leading.Done(): // the lease is lost (or the election ended)
				stop()
			case <-runCtx.Done():
			}
		}()
		err := e.run(runCtx)
		lost := leading.Err() != nil && ctx.Err() == nil
		endElection()
		<-electionDone
		if lost {
			return fmt.Errorf("%s: lease lost", e.name)
		}
		return err
	}
}

// run starts every runnable and waits for all of them; the first to fail stops the others.
func (e *elected) run(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for _, r := range e.runnables {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
				once.Do(func() { first = fmt.Errorf("%s: %w", e.name, err) })
				stop()
			}
		}()
	}
	wg.Wait()
	return first
}

// grouped is a manager whose Add puts what needs a leader into a lease group instead. Every
// runnable that declares it needs no leader election (caches, servers, the groups) still goes
// to the manager itself.
type grouped struct {
	manager.Manager
	group *elected
}

func (g grouped) Add(r manager.Runnable) error {
	if l, ok := r.(manager.LeaderElectionRunnable); ok && !l.NeedLeaderElection() {
		return g.Manager.Add(r)
	}
	return g.group.add(r)
}

// Elected is closed once the group holds its lease.
func (g grouped) Elected() <-chan struct{} { return g.group.leading }

package shards

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leaseRecord serves a leader lease's record as the lock reads it, and counts the reads.
type leaseRecord struct {
	mu     sync.Mutex
	record *resourcelock.LeaderElectionRecord // nil: no lease
	reads  int
}

func (l *leaseRecord) set(r *resourcelock.LeaderElectionRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.record = r
}

func (l *leaseRecord) readCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reads
}

func (l *leaseRecord) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	if l.record == nil {
		return nil, nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "leader")
	}
	r := *l.record
	return &r, nil, nil
}

func (l *leaseRecord) Create(context.Context, resourcelock.LeaderElectionRecord) error {
	return errors.New("read only")
}
func (l *leaseRecord) Update(context.Context, resourcelock.LeaderElectionRecord) error {
	return errors.New("read only")
}
func (l *leaseRecord) RecordEvent(string) {}
func (l *leaseRecord) Identity() string   { return "test" }
func (l *leaseRecord) Describe() string   { return "flexsite-system/leader" }

func held(holder string, renewed time.Time) *resourcelock.LeaderElectionRecord {
	return &resourcelock.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15,
		RenewTime: metav1.NewTime(renewed)}
}

func TestWaitForShardedLeaderGoesOnAtOnce(t *testing.T) {
	now := time.Now()
	cases := map[string]*resourcelock.LeaderElectionRecord{
		"no leader lease yet":                   nil,
		"a released lease":                      held("", now),
		"a lease a replica with shards holds":   held(shardedHolderPrefix+"flexsite-0_abc", now),
		"a lease an API tier replica holds":     held(APIHolderPrefix+"flexsite-api-0_abc", now),
		"a lease its holder stopped renewing":   held("flexsite-7d9_abc", now.Add(-time.Minute)),
		"held by a replica with shards, lapsed": held(shardedHolderPrefix+"x", now.Add(-time.Minute)),
	}
	for name, record := range cases {
		t.Run(name, func(t *testing.T) {
			lock := &leaseRecord{record: record}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := waitForShardedLeader(lock, time.Millisecond)(ctx); err != nil {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatal("waited although no replica without shards leads")
			}
			if lock.readCount() != 1 {
				t.Fatalf("%d reads of the lease, want 1", lock.readCount())
			}
		})
	}
}

func TestWaitForShardedLeaderWaitsForTheOldLeader(t *testing.T) {
	lock := &leaseRecord{record: held("flexsite-7d9_abc", time.Now().Add(time.Hour))} // renewed, and stays valid
	done := make(chan error, 1)
	go func() { done <- waitForShardedLeader(lock, time.Millisecond)(context.Background()) }()
	// It read the lease, found the old leader, and read it again: it waits.
	deadline := time.After(10 * time.Second)
	for lock.readCount() < 3 {
		select {
		case err := <-done:
			t.Fatalf("went on (%v) while a replica without shards held the lease", err)
		case <-deadline:
			t.Fatal("the lease was not read again")
		case <-time.After(time.Millisecond):
		}
	}
	lock.set(held("", time.Now())) // the old leader's pod terminates and releases it
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting after the old leader released the lease")
	}
}

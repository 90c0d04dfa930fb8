package main

import (
	"sync/atomic"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// In a shard, setupServer's manager is the leader's group (shards.Replica.OrgWide), which runs
// a runnable on the leader only unless it says it needs no leader: the readiness marker must
// say so, or every replica but the leader answers 503 for ever (the bench's second shard did).
func TestCacheSyncedMarkerRunsOnEveryReplica(t *testing.T) {
	var synced atomic.Bool
	r, ok := cacheSyncedMarker(nil, &synced).(manager.LeaderElectionRunnable)
	if !ok || r.NeedLeaderElection() {
		t.Fatalf("the readiness marker needs a leader (LeaderElectionRunnable %v): a non-leader shard never turns ready", ok)
	}
}

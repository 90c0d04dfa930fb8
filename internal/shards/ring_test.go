package shards

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// RingLists and Ring name the same kinds: a kind added to the ring is listed too.
func TestRingListsAreTheRingsKinds(t *testing.T) {
	var inRing []string
	for _, r := range Ring().Spec.Resources {
		inRing = append(inRing, r.Resource)
		for _, c := range r.ControlledResources {
			inRing = append(inRing, c.Resource)
		}
	}
	listed := make([]string, 0, len(RingLists()))
	for _, l := range RingLists() {
		kind := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", l), "*v1alpha1."), "List")
		listed = append(listed, strings.ToLower(kind)+"s")
	}
	slices.Sort(inRing)
	slices.Sort(listed)
	if !slices.Equal(inRing, listed) {
		t.Fatalf("the ring's resources %v, its lists' %v", inRing, listed)
	}
}

// A shard's cache holds the ring's kinds only where they carry its label, keeps what else
// was said of them (a transform), and leaves every other kind whole.
func TestOwnCacheNarrowsTheRingsKindsOnly(t *testing.T) {
	transform := func(o any) (any, error) { return o, nil }
	lease := &coordinationv1.Lease{}
	opts := OwnCache(cache.Options{ByObject: map[client.Object]cache.ByObject{
		&flexv1.RewardLedger{}: {Transform: transform},
		lease:                  {Label: labels.Everything()},
	}}, "shard-a")
	if len(opts.ByObject) != len(ringObjects())+1 {
		t.Fatalf("%d kinds narrowed, want the ring's %d and the lease", len(opts.ByObject), len(ringObjects()))
	}
	if len(ringObjects()) != len(RingLists()) {
		t.Fatalf("%d ring objects, %d ring lists", len(ringObjects()), len(RingLists()))
	}
	mine := labels.Set{ShardLabel: "shard-a"}
	theirs := labels.Set{ShardLabel: "shard-b"}
	for obj, by := range opts.ByObject {
		if obj == lease {
			if by.Label.String() != labels.Everything().String() {
				t.Fatalf("the lease's selector changed to %v", by.Label)
			}
			continue
		}
		if by.Label == nil || !by.Label.Matches(mine) || by.Label.Matches(theirs) || by.Label.Matches(labels.Set{}) {
			t.Fatalf("%T: selector %v", obj, by.Label)
		}
		if _, ok := obj.(*flexv1.RewardLedger); ok && by.Transform == nil {
			t.Fatal("the ledgers' transform was dropped")
		}
	}
}

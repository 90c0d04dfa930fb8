package shards

import (
	"fmt"
	"slices"
	"strings"
	"testing"
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

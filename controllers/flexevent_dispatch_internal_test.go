package controllers

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// A burst of dispatch notifications never blocks the listener, and reaches the controller
// once per event; a lost connection ("") asks for every event.
func TestChangesCoalesce(t *testing.T) {
	c := newChanges()
	for i := range 10000 {
		c.add("org", fmt.Sprintf("ev-%d", i%3)) // nothing takes them meanwhile: add must not block
	}
	keys, resync := c.take()
	want := map[types.NamespacedName]bool{{Namespace: "org", Name: "ev-0"}: true, {Namespace: "org", Name: "ev-1"}: true,
		{Namespace: "org", Name: "ev-2"}: true}
	if resync || fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("took %v (resync %v), want %v", keys, resync, want)
	}
	if len(c.wake) != 1 {
		t.Fatalf("%d wake-ups pending, want 1", len(c.wake))
	}
	<-c.wake
	c.add("", "")
	if keys, resync := c.take(); !resync || len(keys) != 0 {
		t.Fatalf("after a reconnection: %v, resync %v", keys, resync)
	}
}

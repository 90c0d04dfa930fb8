package db

import (
	"fmt"
	"maps"
	"testing"
)

// Changes coalesces: a burst of one key is one key, a resync is a flag, one wake-up stands for
// all, and the set is empty after it is taken; nothing blocks while nobody takes.
func TestChangesCoalesce(t *testing.T) {
	c := NewChanges[string]()
	for i := range 10000 {
		c.Note(fmt.Sprintf("ev-%d", i%3))
	}
	keys, resync := c.Take()
	if want := map[string]bool{"ev-0": true, "ev-1": true, "ev-2": true}; resync || !maps.Equal(keys, want) {
		t.Fatalf("took %v (resync %v), want %v", keys, resync, want)
	}
	if len(c.wake) != 1 {
		t.Fatalf("%d wake-ups pending, want 1", len(c.wake))
	}
	<-c.Wake()
	c.Resync()
	if keys, resync := c.Take(); !resync || len(keys) != 0 {
		t.Fatalf("after a reconnection: %v, resync %v", keys, resync)
	}
}

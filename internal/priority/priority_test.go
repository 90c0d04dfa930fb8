package priority

import (
	"context"
	"testing"
)

// slotNow takes a slot if one is free at once: with a cancelled context, Slot answers an
// error instead of waiting.
func slotNow(t *testing.T, g *Gate) (func(), bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	release, err := g.Slot(ctx)
	return release, err == nil
}

func TestGateThinsBackgroundWhileInteractive(t *testing.T) {
	g := NewGate(2)
	r1, ok1 := slotNow(t, g)
	r2, ok2 := slotNow(t, g)
	if !ok1 || !ok2 {
		t.Fatal("two slots of two were not free")
	}
	if _, ok := slotNow(t, g); ok {
		t.Fatal("a third slot of two was handed out")
	}
	r2()
	r2() // a second release is a no-op
	end := g.Begin()
	if _, ok := slotNow(t, g); ok {
		t.Fatal("a second slot was handed out while interactive work is in flight")
	}
	r1()
	r3, ok := slotNow(t, g)
	if !ok {
		t.Fatal("no slot while interactive work is in flight and none is held")
	}
	end()
	r4, ok := slotNow(t, g)
	if !ok {
		t.Fatal("no second slot once interactive work is done")
	}
	r3()
	r4()
}

// A waiting Slot is woken when a slot frees.
func TestGateWakesWaiters(t *testing.T) {
	g := NewGate(1)
	r1, _ := slotNow(t, g)
	got := make(chan func(), 1)
	go func() {
		release, err := g.Slot(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- release
	}()
	r1()
	(<-got)()
}

package priority

import (
	"context"
	"sync"
	"testing"
	"time"
)

// clock is a hand-moved clock: no test here waits on real time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestGate(max int, share float64) (*Gate, *clock) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return NewGate(max, Options{Share: share, Linger: 100 * time.Millisecond, Now: c.now}), c
}

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
	g, c := newTestGate(2, 0.25)
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
	// r1 was taken while idle: its release while busy paces for 0 (held no time).
	r3, ok := slotNow(t, g)
	if !ok {
		t.Fatal("no slot while interactive work is in flight and none is held")
	}
	end()
	if _, ok := slotNow(t, g); ok {
		t.Fatal("a second slot right after the interactive request ended (within the linger)")
	}
	c.advance(100 * time.Millisecond)
	r4, ok := slotNow(t, g)
	if !ok {
		t.Fatal("no second slot once interactive work is done and the linger is over")
	}
	r3()
	r4()
}

// While interactive work is in flight, a slot held for d keeps the next back for
// d×(1−share)/share; once the interactive work (and its linger) is over, the pause is void.
func TestGatePacesBackgroundWhileInteractive(t *testing.T) {
	g, c := newTestGate(4, 0.25)
	end := g.Begin()
	r, ok := slotNow(t, g)
	if !ok {
		t.Fatal("no slot while busy and none held")
	}
	c.advance(10 * time.Millisecond)
	r()
	for _, step := range []struct {
		advance time.Duration
		free    bool
	}{
		{0, false},
		{29 * time.Millisecond, false}, // 10 ms held at a share of 1/4: 30 ms of pause
		{time.Millisecond, true},
	} {
		c.advance(step.advance)
		release, ok := slotNow(t, g)
		if ok != step.free {
			t.Fatalf("after %v more: slot free %v, want %v", step.advance, ok, step.free)
		}
		if ok {
			c.advance(40 * time.Millisecond)
			release() // 40 ms held: the next waits 120 ms while busy
		}
	}
	if _, ok := slotNow(t, g); ok {
		t.Fatal("slot free during the pause")
	}
	end()
	c.advance(100 * time.Millisecond) // the linger, shorter than the pause
	releases := make([]func(), 0, 4)
	for range 4 {
		release, ok := slotNow(t, g)
		if !ok {
			t.Fatal("full concurrency not back once interactive work is over")
		}
		releases = append(releases, release)
	}
	for _, release := range releases {
		release()
	}
}

// A waiting Slot is woken when a slot frees.
func TestGateWakesWaiters(t *testing.T) {
	g, _ := newTestGate(1, 0.25)
	r1, _ := slotNow(t, g)
	got := slotLater(t, g)
	r1()
	awaitSlot(t, got)()
}

// A Slot paced by interactive work is let through when that work ends and its linger
// passes, without waiting out the pause (the timer set for the linger's end wakes it).
func TestGateWakesPacedWaiterWhenInteractiveEnds(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	// Real linger of a millisecond: the waiter's timer is real, the clock moved by hand.
	g := NewGate(1, Options{Share: 0.01, Linger: time.Millisecond, Now: c.now})
	end := g.Begin()
	r, _ := slotNow(t, g)
	c.advance(time.Second)
	r() // paced for 99 s
	got := slotLater(t, g)
	end()
	c.advance(time.Millisecond) // past the linger
	awaitSlot(t, got)()
}

// waitBound bounds every wait in these tests: a gate that never wakes its waiter fails the
// test with a message instead of hanging the package until go test's own timeout.
const waitBound = 10 * time.Second

// slotLater asks g for a slot in another goroutine, for at most waitBound; the channel gives
// its release, or nil when none came.
func slotLater(t *testing.T, g *Gate) <-chan func() {
	t.Helper()
	got := make(chan func(), 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		release, err := g.Slot(ctx)
		if err != nil {
			t.Errorf("the waiting Slot was not woken within %v: %v", waitBound, err)
			release = nil
		}
		got <- release
	}()
	return got
}

// awaitSlot is the release slotLater got; the test fails (it does not hang) without one.
func awaitSlot(t *testing.T, got <-chan func()) func() {
	t.Helper()
	select {
	case release := <-got:
		if release == nil {
			t.FailNow() // slotLater said why
		}
		return release
	case <-time.After(2 * waitBound): // a failure bound only: slotLater's own deadline comes first
		t.Fatalf("no answer from Slot within %v", 2*waitBound)
		return nil
	}
}

// A reader's ask reaches the controller's source in order, and asking never blocks, even with
// nobody taking the asks (a replica that does not lead): past the buffer they are dropped.
func TestAwaitedAsksArriveAndNeverBlock(t *testing.T) {
	g := NewGate(4)
	g.Awaited("org", "mpan-1")
	select {
	case key := <-g.AwaitedWork():
		if key.Namespace != "org" || key.Name != "mpan-1" {
			t.Fatalf("got %v", key)
		}
	default:
		t.Fatal("the ask did not arrive")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range awaitedBuffer + 10 {
			g.Awaited("org", "mpan-2")
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Awaited blocked with nobody taking the asks")
	}
	if n := len(g.AwaitedWork()); n != awaitedBuffer {
		t.Fatalf("%d asks kept, want the buffer's %d", n, awaitedBuffer)
	}
}

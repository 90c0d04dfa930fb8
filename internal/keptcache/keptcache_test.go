package keptcache_test

import (
	"fmt"
	"testing"

	"github.com/flexsite/flexsite/internal/keptcache"
)

// put keeps v at cost for a read begun at epoch.
func put(c *keptcache.Cache[string, string], k string, epoch uint64, v string, cost int) {
	c.Keep(k, epoch, func(string, bool) (string, int) { return v, cost })
}

func served(c *keptcache.Cache[string, string], k string) string {
	v, _ := c.Get(k)
	return v
}

// The epoch rule, and listening: what each sequence leaves served.
func TestEpochAndListening(t *testing.T) {
	for _, tc := range []struct {
		name string
		// run plays reads and notifications on a listening cache, and answers what "k" serves.
		run  func(c *keptcache.Cache[string, string]) string
		want string
	}{
		{"an undisturbed read is kept", func(c *keptcache.Cache[string, string]) string {
			put(c, "k", c.Begin(), "v", 10)
			return served(c, "k")
		}, "v"},
		{"a read begun before its key's invalidation is not kept after it", func(c *keptcache.Cache[string, string]) string {
			epoch := c.Begin()
			c.Invalidate("k")
			put(c, "k", epoch, "stale", 10)
			return served(c, "k")
		}, ""},
		{"a read begun before another key's invalidation is not kept either (one epoch for all)", func(c *keptcache.Cache[string, string]) string {
			epoch := c.Begin()
			c.Invalidate("other")
			put(c, "k", epoch, "stale", 10)
			return served(c, "k")
		}, ""},
		{"Lookup's token keeps a read as Begin's does", func(c *keptcache.Cache[string, string]) string {
			if _, _, ok := c.Lookup("k"); ok {
				return "found before kept"
			}
			_, epoch, _ := c.Lookup("k")
			put(c, "k", epoch, "v", 10)
			v, _, ok := c.Lookup("k")
			if !ok {
				return "not found once kept"
			}
			return v
		}, "v"},
		{"a read begun with Lookup before an invalidation is not kept after it", func(c *keptcache.Cache[string, string]) string {
			_, epoch, _ := c.Lookup("k")
			c.Invalidate("other")
			put(c, "k", epoch, "stale", 10)
			return served(c, "k")
		}, ""},
		{"an invalidation drops what was kept", func(c *keptcache.Cache[string, string]) string {
			put(c, "k", c.Begin(), "v", 10)
			c.Invalidate("k")
			return served(c, "k")
		}, ""},
		{"another key's invalidation leaves it", func(c *keptcache.Cache[string, string]) string {
			put(c, "k", c.Begin(), "v", 10)
			c.Invalidate("other")
			return served(c, "k")
		}, "v"},
		{"nothing is served while not listening", func(c *keptcache.Cache[string, string]) string {
			put(c, "k", c.Begin(), "v", 10)
			c.Reset(false)
			return served(c, "k")
		}, ""},
		{"nothing is kept while not listening", func(c *keptcache.Cache[string, string]) string {
			c.Reset(false)
			if epoch := c.Begin(); epoch != 0 {
				return fmt.Sprintf("token %d", epoch)
			}
			put(c, "k", c.Begin(), "v", 10)
			c.Reset(true)
			return served(c, "k")
		}, ""},
		{"listening again drops what was kept before", func(c *keptcache.Cache[string, string]) string {
			put(c, "k", c.Begin(), "v", 10)
			c.Reset(false)
			c.Reset(true)
			return served(c, "k")
		}, ""},
		{"a read begun before the connection was lost is not kept after it", func(c *keptcache.Cache[string, string]) string {
			epoch := c.Begin()
			c.Reset(false)
			c.Reset(true)
			put(c, "k", epoch, "stale", 10)
			return served(c, "k")
		}, ""},
		{"a keep replaces the entry, given the one kept", func(c *keptcache.Cache[string, string]) string {
			put(c, "k", c.Begin(), "a", 10)
			c.Keep("k", c.Begin(), func(old string, had bool) (string, int) { return fmt.Sprint(old, had, "b"), 20 })
			return served(c, "k")
		}, "atrueb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := keptcache.New[string, string](1000, nil)
			c.Reset(true)
			if got := tc.run(c); got != tc.want {
				t.Errorf("served %q, want %q", got, tc.want)
			}
		})
	}
}

// The byte bound: past it other entries make room; an entry larger than the bound is not kept
// (and the one it replaces goes); what is reported is what is kept.
func TestByteBound(t *testing.T) {
	reported := -1
	c := keptcache.New[string, string](300, func(bytes int) { reported = bytes })
	c.Reset(true)
	for i := range 10 {
		put(c, fmt.Sprint(i), c.Begin(), "v", 100)
		if c.Bytes() > 300 {
			t.Fatalf("after %d entries %d bytes kept, bound 300", i+1, c.Bytes())
		}
	}
	if c.Len() != 3 || c.Bytes() != 300 || reported != 300 {
		t.Errorf("%d entries, %d bytes (reported %d); want 3, 300", c.Len(), c.Bytes(), reported)
	}
	if served(c, "9") != "v" {
		t.Error("the last entry kept made no room for itself")
	}
	// A replaced entry is counted once: growing 9 to 250 evicts the others, not 9.
	put(c, "9", c.Begin(), "w", 250)
	if c.Len() != 1 || c.Bytes() != 250 || served(c, "9") != "w" {
		t.Errorf("after growing an entry: %d entries, %d bytes, 9 serves %q", c.Len(), c.Bytes(), served(c, "9"))
	}
	put(c, "9", c.Begin(), "huge", 301)
	if c.Len() != 0 || c.Bytes() != 0 || reported != 0 {
		t.Errorf("an entry larger than the bound: %d entries, %d bytes kept (reported %d)", c.Len(), c.Bytes(), reported)
	}
	// A bound of nothing keeps nothing.
	none := keptcache.New[string, string](0, nil)
	none.Reset(true)
	put(none, "k", none.Begin(), "v", 1)
	if served(none, "k") != "" {
		t.Error("a cache bounded to 0 bytes kept an entry")
	}
}

// A nil cache keeps and serves nothing (a service built without one).
func TestNilCache(t *testing.T) {
	var c *keptcache.Cache[string, string]
	c.Reset(true)
	put(c, "k", c.Begin(), "v", 1)
	c.Invalidate("k")
	if _, ok := c.Get("k"); ok || c.Listening() || c.Bytes() != 0 || c.Len() != 0 {
		t.Error("a nil cache kept something")
	}
}

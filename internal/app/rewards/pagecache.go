package rewards

import (
	"context"
	"os"
	"sync"
	"sync/atomic"

	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/ledger"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// maxKeptPageBytes bounds the kept transactions pages by the memory they take: 32 MiB. A page
// is kept in the ledger's compact form (48 bytes a transaction, ~2.5 KB a year of weekly
// rewards), not encoded (~12 KB): the bound holds ~12,000 sites' pages, not ~2,500, so that a
// fleet of 10,000 sites read in turn is answered from memory (issue 39), at the cost of
// encoding each answer (a few µs for 52 transactions). Past the bound, arbitrary sites make
// room (their next read asks the database again, in one statement).
// flexsite_rewards_kept_page_bytes shows what is held.
const maxKeptPageBytes = 32 << 20

// noKeptPagesEnv, set to any value in the manager's environment, keeps no pages nor balances:
// for the bench only (cmd/flexsite-bench's read path), to measure every read as a miss, as at a
// fleet the kept pages cannot hold. Nothing else sets it.
const noKeptPagesEnv = "FLEXSITE_BENCH_NO_KEPT_PAGES"

// keptPageBytes is the bound of the kept pages: maxKeptPageBytes, or none under noKeptPagesEnv.
func keptPageBytes() int {
	if os.Getenv(noKeptPagesEnv) != "" {
		return 0
	}
	return maxKeptPageBytes
}

// pageBookkeeping is what a kept page costs beside its body: the entries and map slots,
// rounded up.
const pageBookkeeping = 256

// pageKey selects a kept page of a site: the paging of a query without since or until.
type pageKey struct{ limit, offset int }

// keptSite is what is kept of one site: its balance and its pages.
type keptSite struct {
	balance *household.Balance
	pages   map[pageKey]*ledger.Ledger
	bytes   int
}

// pageCache keeps, per site, the balance and the transactions pages read from the database,
// in the ledger's compact form (the policy's verdicts depend on the clock and are worked out
// per answer), so that a read of an unchanged ledger costs no SQL.
//
// It is never staler than PostgreSQL's notifications: a site's entry is dropped at once by
// this replica's own writes through the use cases, and on every "<namespace>/<site id>"
// notification of rewardstore.ChangedChannel (any writer's commit, any replica). It serves
// only while it listens: when the listening connection is lost, everything is dropped and
// reads go to the database until it listens again. A read fills the cache only if nothing
// was invalidated since it began (epoch), so a read that saw the ledger before a write cannot
// keep that view after the write's invalidation.
type pageCache struct {
	mu        sync.Mutex
	sites     map[rewardstore.Site]*keptSite
	bytes     int
	maxBytes  int
	epoch     uint64
	listening atomic.Bool
}

func newPageCache(maxBytes int) *pageCache {
	return &pageCache{sites: map[rewardstore.Site]*keptSite{}, maxBytes: maxBytes}
}

// begin is the token a read takes before it asks the database (0: the cache is not in use).
func (c *pageCache) begin() uint64 {
	if c == nil || !c.listening.Load() {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// page is a kept page (read-only) and the site's kept balance (nil, nil when not kept).
func (c *pageCache) page(site rewardstore.Site, k pageKey) (*ledger.Ledger, *household.Balance) {
	if c == nil || !c.listening.Load() {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.sites[site]
	if e == nil || e.balance == nil {
		return nil, nil
	}
	return e.pages[k], e.balance
}

// balance is the site's kept balance (nil when not kept).
func (c *pageCache) balance(site rewardstore.Site) *household.Balance {
	if c == nil || !c.listening.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.sites[site]; e != nil {
		return e.balance
	}
	return nil
}

// entry is the site's entry for a fill begun at epoch (nil when invalidated since): the
// caller holds mu.
func (c *pageCache) entry(site rewardstore.Site, epoch uint64) *keptSite {
	if epoch == 0 || epoch != c.epoch || !c.listening.Load() {
		return nil
	}
	e := c.sites[site]
	if e == nil {
		e = &keptSite{pages: map[pageKey]*ledger.Ledger{}, bytes: pageBookkeeping}
		if !c.makeRoom(e.bytes) {
			return nil
		}
		c.sites[site] = e
		c.bytes += e.bytes
	}
	return e
}

// keepBalance keeps the site's balance read by a read begun at epoch.
func (c *pageCache) keepBalance(site rewardstore.Site, epoch uint64, b household.Balance) {
	if c == nil || epoch == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entry(site, epoch); e != nil {
		e.balance = &b
	}
	c.report()
}

// keepPage keeps a page read by a read begun at epoch; the page is read-only from then on.
func (c *pageCache) keepPage(site rewardstore.Site, k pageKey, epoch uint64, page *ledger.Ledger) {
	if c == nil || epoch == 0 {
		return
	}
	page.Trim()
	cost := page.Size() + pageBookkeeping
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.report()
	e := c.entry(site, epoch)
	if e == nil {
		return
	}
	if old, ok := e.pages[k]; ok {
		e.bytes -= old.Size() + pageBookkeeping
		c.bytes -= old.Size() + pageBookkeeping
		delete(e.pages, k)
	}
	delete(c.sites, site) // not evicted to make room for itself
	ok := c.makeRoom(cost)
	c.sites[site] = e
	if !ok {
		return
	}
	e.pages[k] = page
	e.bytes += cost
	c.bytes += cost
}

// makeRoom drops arbitrary sites until cost fits (false when it cannot): the caller holds mu.
func (c *pageCache) makeRoom(cost int) bool {
	if cost > c.maxBytes {
		return false
	}
	for key, e := range c.sites {
		if c.bytes+cost <= c.maxBytes {
			break
		}
		c.bytes -= e.bytes
		delete(c.sites, key)
	}
	return c.bytes+cost <= c.maxBytes
}

// invalidate drops what is kept of a site (its ledger changed).
func (c *pageCache) invalidate(site rewardstore.Site) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	if e := c.sites[site]; e != nil {
		c.bytes -= e.bytes
		delete(c.sites, site)
	}
	c.report()
}

// reset drops everything and says whether the cache is in use (listening).
func (c *pageCache) reset(listening bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.listening.Store(listening)
	clear(c.sites)
	c.bytes = 0
	c.report()
}

func (c *pageCache) report() { metrics.KeptRewardPageBytes.Set(float64(c.bytes)) }

// Listen keeps the transactions pages and balances this replica reads (pageCache) while it
// listens to PostgreSQL's notifications of ledger changes, until ctx ends. Without it (or
// while its connection is lost) every read asks the database.
func (s *Service) Listen(ctx context.Context) error {
	defer s.pages.reset(false)
	return rewardstore.Watch(ctx, s.Store.Pool, func(namespace, siteID string) {
		s.pages.invalidate(rewardstore.Site{Namespace: namespace, ID: siteID})
	}, func(bool) {
		s.pages.reset(true)
	}, func() {
		s.pages.reset(false)
	})
}

// KeptPageBytes is the memory the kept pages are counted for (tests).
func (s *Service) KeptPageBytes() int {
	s.pages.mu.Lock()
	defer s.pages.mu.Unlock()
	return s.pages.bytes
}

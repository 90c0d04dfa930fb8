package rewards

import (
	"context"
	"maps"
	"os"

	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/keptcache"
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

// keptSite is what is kept of one site: its balance and its pages, read-only once kept (a
// fill makes a new one, sharing the pages it keeps).
type keptSite struct {
	balance *household.Balance
	pages   map[pageKey]*ledger.Ledger
	bytes   int
}

// pageCache keeps, per site, the balance and the transactions pages read from the database,
// in the ledger's compact form (the policy's verdicts depend on the clock and are worked out
// per answer), so that a read of an unchanged ledger costs no SQL.
//
// It is a cache kept while listening (internal/keptcache: served only while listening, the
// epoch rule, the byte bound): a site's entry is dropped at once by this replica's own writes
// through the use cases, and on every "<namespace>/<site id>" notification of
// rewardstore.ChangedChannel (any writer's commit, any replica); while the listening
// connection is lost, reads go to the database.
type pageCache struct {
	*keptcache.Cache[rewardstore.Site, *keptSite]
}

func newPageCache(maxBytes int) pageCache {
	return pageCache{keptcache.New[rewardstore.Site, *keptSite](maxBytes, func(bytes int) {
		metrics.KeptRewardPageBytes.Set(float64(bytes))
	})}
}

// page is a kept page (read-only) and the site's kept balance (nil, nil when not kept).
func (c pageCache) page(site rewardstore.Site, k pageKey) (*ledger.Ledger, *household.Balance) {
	e, ok := c.Get(site)
	if !ok || e.balance == nil {
		return nil, nil
	}
	return e.pages[k], e.balance
}

// balance is the site's kept balance (nil when not kept).
func (c pageCache) balance(site rewardstore.Site) *household.Balance {
	if e, ok := c.Get(site); ok {
		return e.balance
	}
	return nil
}

// keepBalance keeps the site's balance read by a read begun at epoch.
func (c pageCache) keepBalance(site rewardstore.Site, epoch uint64, b household.Balance) {
	c.Keep(site, epoch, func(old *keptSite, had bool) (*keptSite, int) {
		e := &keptSite{balance: &b, bytes: pageBookkeeping}
		if had {
			e.pages, e.bytes = old.pages, old.bytes
		}
		return e, e.bytes
	})
}

// keepPage keeps a page read by a read begun at epoch; the page is read-only from then on.
func (c pageCache) keepPage(site rewardstore.Site, k pageKey, epoch uint64, page *ledger.Ledger) {
	if epoch == 0 {
		return
	}
	page.Trim()
	cost := page.Size() + pageBookkeeping
	c.Keep(site, epoch, func(old *keptSite, had bool) (*keptSite, int) {
		e := &keptSite{pages: map[pageKey]*ledger.Ledger{}, bytes: pageBookkeeping}
		if had {
			maps.Copy(e.pages, old.pages)
			e.balance, e.bytes = old.balance, old.bytes
		}
		if prev, ok := e.pages[k]; ok {
			e.bytes -= prev.Size() + pageBookkeeping
		}
		e.pages[k] = page
		e.bytes += cost
		return e, e.bytes
	})
}

// Listen keeps the transactions pages and balances this replica reads (pageCache) while it
// listens to PostgreSQL's notifications of ledger changes, until ctx ends. Without it (or
// while its connection is lost) every read asks the database.
func (s *Service) Listen(ctx context.Context) error {
	defer s.pages.Reset(false)
	return rewardstore.Watch(ctx, s.Store.Pool, func(namespace, siteID string) {
		s.pages.Invalidate(rewardstore.Site{Namespace: namespace, ID: siteID})
	}, func(bool) {
		s.pages.Reset(true)
	}, func() {
		s.pages.Reset(false)
	})
}

// KeptPageBytes is the memory the kept pages are counted for (tests).
func (s *Service) KeptPageBytes() int { return s.pages.Bytes() }

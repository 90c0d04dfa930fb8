package pricing

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/pricestore"
)

// maxKeptPriceBytes bounds the kept prices by the memory they take (keptCost): 8 MiB, about
// 1,000 (organisation, market) pairs with a curve of two days (~4 KB encoded, ~100 prices).
// A reader keeps one entry per pair (the current horizon's; a new settlement period replaces
// it), and only the markets its propositions name are read, so the bound is reached only by
// about 500 organisations reading at once; past it, arbitrary pairs make room (their next
// read asks the database again). flexsite_pricing_kept_bytes shows what is held.
const maxKeptPriceBytes = 8 << 20

// keptBookkeeping is what an entry costs beside its prices and encoded curve, rounded up;
// keptPriceBytes what one kept price costs (a time.Time and a Centi).
const (
	keptBookkeeping = 256
	keptPriceBytes  = 32
)

// marketKey selects an organisation's market.
type marketKey struct{ organisation, market string }

// keptPrices is what is kept of a market of an organisation: the span read for the horizon
// that begins at periodStart (pricestore.Range's answer), and once encoded, the price curve's
// answer over it.
type keptPrices struct {
	periodStart time.Time
	span        pricestore.Span
	curve       []byte
	bytes       int
}

// priceCache keeps, per (organisation, market), the prices a price curve and a battery's
// schedule read over the current horizon, and the encoded price curve: every site of an
// organisation reads the same answer at a given moment, so an unchanged market costs no SQL.
//
// It is never staler than PostgreSQL's notifications (pagecache.go's rule in
// internal/app/rewards): a market's entry is dropped at once by this replica's own
// declarations, and on every "<organisation>/<market>" notification of
// pricestore.ChangedChannel (any replica's commit). It serves only while it listens: when the
// listening connection is lost, everything is dropped and reads go to the database (503 when
// it is down) until it listens again. A read fills the cache only if nothing was invalidated
// since it began (epoch), so a read that saw the prices before a declaration cannot keep that
// view after the declaration's invalidation.
type priceCache struct {
	mu        sync.Mutex
	markets   map[marketKey]*keptPrices
	bytes     int
	maxBytes  int
	epoch     uint64
	listening atomic.Bool
}

func newPriceCache(maxBytes int) *priceCache {
	return &priceCache{markets: map[marketKey]*keptPrices{}, maxBytes: maxBytes}
}

// begin is the token a read takes before it asks the database (0: the cache is not in use).
func (c *priceCache) begin() uint64 {
	if c == nil || !c.listening.Load() {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// get is the kept entry of a market for the horizon beginning at periodStart (nil when none).
// The entry is read-only: a fill replaces it whole.
func (c *priceCache) get(k marketKey, periodStart time.Time) *keptPrices {
	if c == nil || !c.listening.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.markets[k]; e != nil && e.periodStart.Equal(periodStart) {
		return e
	}
	return nil
}

// keep keeps what a read begun at epoch read (the span, and the encoded curve when not nil),
// replacing the market's entry.
func (c *priceCache) keep(k marketKey, epoch uint64, periodStart time.Time, span pricestore.Span, curve []byte) {
	if c == nil || epoch == 0 {
		return
	}
	e := &keptPrices{periodStart: periodStart, span: span, curve: curve,
		bytes: keptBookkeeping + len(span.Prices)*keptPriceBytes + len(curve)}
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.report()
	if epoch != c.epoch || !c.listening.Load() {
		return
	}
	c.drop(k)
	if e.bytes > c.maxBytes {
		return
	}
	for key := range c.markets {
		if c.bytes+e.bytes <= c.maxBytes {
			break
		}
		c.drop(key)
	}
	c.markets[k] = e
	c.bytes += e.bytes
}

// drop forgets a market's entry: the caller holds mu.
func (c *priceCache) drop(k marketKey) {
	if old := c.markets[k]; old != nil {
		c.bytes -= old.bytes
		delete(c.markets, k)
	}
}

// invalidate drops what is kept of a market (its prices were declared).
func (c *priceCache) invalidate(k marketKey) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.drop(k)
	c.report()
}

// reset drops everything and says whether the cache is in use (listening).
func (c *priceCache) reset(listening bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.listening.Store(listening)
	clear(c.markets)
	c.bytes = 0
	c.report()
}

func (c *priceCache) report() { metrics.KeptPriceBytes.Set(float64(c.bytes)) }

// Listen keeps the prices this replica reads (priceCache) while it listens to PostgreSQL's
// notifications of declarations, until ctx ends. Without it (or while its connection is lost)
// every read asks the database.
func (s *Service) Listen(ctx context.Context) {
	defer s.kept.reset(false)
	s.Prices.Watch(ctx, func(organisation, market string) {
		s.kept.invalidate(marketKey{organisation, market})
	}, func() { s.kept.reset(true) }, func() { s.kept.reset(false) })
}

// KeepsPrices tells whether the kept prices are in use (listening): tests wait for it.
func (s *Service) KeepsPrices() bool { return s.kept.listening.Load() }

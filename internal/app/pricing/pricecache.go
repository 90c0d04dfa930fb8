package pricing

import (
	"context"
	"time"

	"github.com/flexsite/flexsite/internal/keptcache"
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
// It is a cache kept while listening (internal/keptcache: served only while listening, the
// epoch rule, the byte bound): a market's entry is dropped at once by this replica's own
// declarations, and on every "<organisation>/<market>" notification of
// pricestore.ChangedChannel (any replica's commit); while the listening connection is lost,
// reads go to the database (503 when it is down).
type priceCache struct {
	*keptcache.Cache[marketKey, *keptPrices]
}

func newPriceCache(maxBytes int) priceCache {
	return priceCache{keptcache.New[marketKey, *keptPrices](maxBytes, func(bytes int) {
		metrics.KeptPriceBytes.Set(float64(bytes))
	})}
}

// get is the kept entry of a market for the horizon beginning at periodStart (nil when none).
// The entry is read-only: a fill replaces it whole.
func (c priceCache) get(k marketKey, periodStart time.Time) *keptPrices {
	e, _ := c.lookup(k, periodStart)
	return e
}

// lookup is get with the token of a read begun now (keptcache's Begin), taken at once.
func (c priceCache) lookup(k marketKey, periodStart time.Time) (*keptPrices, uint64) {
	e, epoch, ok := c.Lookup(k)
	if !ok || !e.periodStart.Equal(periodStart) {
		return nil, epoch
	}
	return e, epoch
}

// keep keeps what a read begun at epoch read (the span, and the encoded curve when not nil),
// replacing the market's entry.
func (c priceCache) keep(k marketKey, epoch uint64, periodStart time.Time, span pricestore.Span, curve []byte) {
	e := &keptPrices{periodStart: periodStart, span: span, curve: curve,
		bytes: keptBookkeeping + len(span.Prices)*keptPriceBytes + len(curve)}
	c.Keep(k, epoch, func(*keptPrices, bool) (*keptPrices, int) { return e, e.bytes })
}

// Listen keeps the prices this replica reads (priceCache) while it listens to PostgreSQL's
// notifications of declarations, until ctx ends. Without it (or while its connection is lost)
// every read asks the database.
func (s *Service) Listen(ctx context.Context) {
	defer s.kept.Reset(false)
	s.Prices.Watch(ctx, func(organisation, market string) {
		s.kept.Invalidate(marketKey{organisation, market})
	}, func() { s.kept.Reset(true) }, func() { s.kept.Reset(false) })
}

// KeepsPrices tells whether the kept prices are in use (listening): tests wait for it.
func (s *Service) KeepsPrices() bool { return s.kept.Listening() }

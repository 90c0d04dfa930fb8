package rewards

import (
	"context"
	"sync"

	"github.com/flexsite/flexsite/internal/rewardstore"
)

// maxWrittenSites bounds the sites whose written revision is remembered. Past it, an
// arbitrary site is forgotten: its /info answers from the summary, which follows in moments.
const maxWrittenSites = 16384

// writtenRevisions remembers, per site, the history revision this replica's own latest write
// reached, until the site's RewardLedger summary shows it: a client that credits a site and
// then reads its /info reads its own write, though /info answers from the summary.
type writtenRevisions struct {
	mu    sync.Mutex
	sites map[rewardstore.Site]int64
}

func newWrittenRevisions() *writtenRevisions {
	return &writtenRevisions{sites: map[rewardstore.Site]int64{}}
}

// note records that this replica's write took site to revision rev (or beyond).
func (w *writtenRevisions) note(site rewardstore.Site, rev int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.sites[site]; !ok && len(w.sites) >= maxWrittenSites {
		for k := range w.sites {
			delete(w.sites, k)
			break
		}
	}
	w.sites[site] = max(w.sites[site], rev)
}

// ahead reports whether this replica wrote to site past summarised, the revision a summary
// was computed from; a summary that has caught up ends the remembering.
func (w *writtenRevisions) ahead(site rewardstore.Site, summarised int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	rev, ok := w.sites[site]
	if ok && rev <= summarised {
		delete(w.sites, site)
		return false
	}
	return ok
}

// wrote is what follows every write of this replica to a site's history: what was kept of
// the site is dropped, and the revision the write reached is remembered (unless the database
// cannot say it now: the summary is then read as it is).
func (s *Service) wrote(ctx context.Context, site rewardstore.Site) {
	s.pages.Invalidate(site)
	if rev, err := s.Store.Revision(ctx, site); err == nil {
		s.written.note(site, rev)
	}
}

package facade

import (
	"context"

	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/index"
)

// rulesToRead are the rules in force for an answer that only reads (GET eligibility): from
// the household.Catalogue kept up to date by the cache's informers, without listing the
// catalogue per request, when the cache has informers; else listed (household.LoadRules).
func (s *Server) rulesToRead(ctx context.Context) (eligibility.Rules, error) {
	if s.catalogue != nil {
		return s.catalogue.Rules(ctx)
	}
	return household.LoadRules(ctx, s.Cache)
}

// newCatalogue follows the catalogue through the cache's informers (nil when Cache has none).
func newCatalogue(cfg Config) *household.Catalogue {
	informers, ok := cfg.Cache.(index.InformerSource)
	if !ok {
		return nil
	}
	c, err := household.NewCatalogue(context.Background(), cfg.Cache, informers)
	if err != nil {
		cfg.Log.Error(err, "following the catalogue; every eligibility read lists it instead")
		return nil
	}
	return c
}

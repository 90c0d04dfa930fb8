// Package app is Flexsite's application layer: the use cases of a household's life (onboard,
// initialise, enrol and unenrol, the site and asset lifecycle, eligibility, offboard, the end
// user's household) as typed calls that take a caller and typed inputs and answer typed
// results or a refusal (Error). Every door — the REST API, the hosted flow, the rewards page —
// calls them and translates what they answer into its own language; none of them decides a
// rule itself. The rules are internal/household's and internal/validation's; this package
// applies them against the API server, with its retries, rollback and read-your-writes wait.
// It speaks no HTTP.
package app

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/app/keptanswer"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/index"
)

// DefaultInFlightTimeout is how long a request that creates a site has to write the rest;
// past it the Site controller treats the site as abandoned by a dead request and deletes it.
const DefaultInFlightTimeout = 2 * time.Minute

// Config wires the use cases to the cluster.
type Config struct {
	Log logr.Logger
	// Cache is the manager's cache (with the internal/index indexes): most reads come from it.
	Cache client.Reader
	// APIReader reads past the cache: after a write conflict, and when the cache misses an
	// object this client may have just created.
	APIReader client.Reader
	// Client writes through the API server. Writes made for a caller carry its field manager
	// (FieldManager), taken from the context (auth.WithPrincipal).
	Client client.Client
	// Issuer issues the end user's token (EndUserToken).
	Issuer *auth.Issuer
	// Now is the clock (tests replace it).
	Now func() time.Time
	// InFlightTimeout is how long a request that creates a site has to finish writing it
	// before the Site controller deletes it as abandoned (default DefaultInFlightTimeout).
	InFlightTimeout time.Duration
	// EvaluateFirst, when set, asks the Site controller to evaluate a site ahead of its other
	// work, when a read waits for that site's status (priority.Gate.Awaited).
	EvaluateFirst func(namespace, name string)
}

// Service runs the use cases. One serves every door of a replica.
type Service struct {
	Config
	// catalogue follows the rules for reads (nil when the cache has no informers).
	catalogue *householdstore.Catalogue
	// reads finds sites and assets for the hot reads (reads.go; nil without informers).
	reads *readIndexes
	// kept keeps the encoded eligibility answers (internal/app/keptanswer; nil without reads and
	// catalogue: nothing tells then whether an answer is still current).
	kept *keptanswer.Eligibility
}

// New builds the use cases on cfg.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.InFlightTimeout == 0 {
		cfg.InFlightTimeout = DefaultInFlightTimeout
	}
	// Every write names the API client that made it (managedFields).
	cfg.Client = auth.OwnedClient{Client: cfg.Client}
	s := &Service{Config: cfg, catalogue: newCatalogue(cfg), reads: newReadIndexes(cfg.Cache)}
	if s.catalogue != nil && s.reads != nil {
		s.kept = keptanswer.New(keptanswer.MaxBytes)
		followKept(cfg.Cache, s.kept)
	}
	return s
}

// inFlightDeadline is when a site created now must be complete. It uses the wall clock, not
// the (test-settable) Now: the Site controller compares it with the wall clock.
func (s *Service) inFlightDeadline() time.Time { return time.Now().Add(s.InFlightTimeout) }

// newCatalogue follows the catalogue through the cache's informers (nil when Cache has none).
func newCatalogue(cfg Config) *householdstore.Catalogue {
	informers, ok := cfg.Cache.(index.InformerSource)
	if !ok {
		return nil
	}
	c, err := householdstore.NewCatalogue(context.Background(), cfg.Cache, informers)
	if err != nil {
		cfg.Log.Error(err, "following the catalogue; every eligibility read lists it instead")
		return nil
	}
	return c
}

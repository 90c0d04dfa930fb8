// Package vtn holds the use cases only the OpenADR door needs (docs/openadr.md): the programs an
// organisation offers (its propositions), the VENs its clients register and the resources (its
// assets) each VEN holds, and the reports VENs send, which it hands to the use cases that
// already judge the same facts (dispatch callbacks, readings). Everything else the door does is
// an existing use case's. It speaks neither HTTP nor OpenADR's shapes.
package vtn

import (
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/dispatches"
	"github.com/flexsite/flexsite/internal/app/readings"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/pricestore"
	"github.com/flexsite/flexsite/internal/vtnstore"
)

// Service runs the VTN's own use cases.
type Service struct {
	// Households reads the organisation's assets and the catalogue.
	Households *app.Service
	// Store keeps the VENs, their resources and the reports (required).
	Store *vtnstore.Store
	// Dispatches judge and record what a report says of a dispatch (the dispatch callback's
	// use case), and find the dispatch an event is.
	Dispatches *dispatches.Service
	// Readings judge and store a report's USAGE as readings.
	Readings *readings.Service
	// Prices are the declared market prices (price_curve's events carry them): the same
	// database as Store.
	Prices *pricestore.Store
	// Now is the clock.
	Now func() time.Time
}

// New builds the use cases on the household ones and the VTN's records.
func New(households *app.Service, store *vtnstore.Store) *Service {
	if store == nil {
		panic("vtn.New: the VTN's store is required")
	}
	now := households.Now
	if now == nil {
		now = time.Now
	}
	return &Service{Households: households, Store: store, Now: now, Prices: &pricestore.Store{Pool: store.Pool}}
}

// ErrUnavailable answers a request the database could not serve now: nothing was changed.
var ErrUnavailable = &app.Error{Kind: app.Unavailable,
	Detail: "The VTN's records are unavailable; nothing was changed, retry", RetryAfter: db.RetryAfterSeconds}

// Viewer is what an OpenADR caller sees of the organisation's events and reports: All for the
// business logic; a VEN client, only what targets the assets its VENs hold.
type Viewer struct {
	All bool
	// Assets are the asset ids the VEN client's VENs hold (when not All).
	Assets []string
}

// BusinessLogic tells whether p speaks as the organisation's business logic: a client that may
// write events (flex_events_write). Any other speaks as a VEN (docs/openadr.md).
func BusinessLogic(p *auth.Principal) bool { return p.HasRole(flexv1.RoleFlexEventsWrite) }

// Sees reads p's Viewer, with every asset its VENs hold: what a search of events filters by.
// A question about one asset asks SeesAsset instead, which reads one row.
func (s *Service) Sees(ctx context.Context, p *auth.Principal) (Viewer, error) {
	if BusinessLogic(p) {
		return Viewer{All: true}, nil
	}
	held, err := s.Store.AssetsHeldBy(ctx, p.Namespace, p.ClientName)
	if err != nil {
		return Viewer{}, unavailable(err)
	}
	return Viewer{Assets: held}, nil
}

// SeesAsset tells whether p sees the events of the organisation's asset assetID: the business
// logic sees every asset's, a VEN client those of the assets its VENs hold.
func (s *Service) SeesAsset(ctx context.Context, p *auth.Principal, assetID string) (bool, error) {
	if BusinessLogic(p) {
		return true, nil
	}
	holder, held, err := s.Store.HolderOf(ctx, p.Namespace, assetID)
	if err != nil {
		return false, unavailable(err)
	}
	return held && holder == p.ClientName, nil
}

// SeesAssetAs is SeesAsset for the organisation's API client clientName as its roles are now
// (what a subscription it made is notified of): nothing when it is gone.
func (s *Service) SeesAssetAs(ctx context.Context, organisation, clientName, assetID string) (bool, error) {
	ac := &flexv1.APIClient{}
	err := s.Households.Cache.Get(ctx, types.NamespacedName{Namespace: organisation, Name: clientName}, ac)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return s.SeesAsset(ctx, &auth.Principal{Namespace: organisation, ClientName: clientName, Roles: ac.Spec.Roles}, assetID)
}

// Holds tells whether v sees the asset's events.
func (v Viewer) Holds(assetID string) bool { return v.All || slices.Contains(v.Assets, assetID) }

// ErrProgramNotFound answers a program id that names no proposition offered.
var ErrProgramNotFound = app.Fail(app.NotFound, "Program not found")

// Program is a proposition as a program: what every organisation is offered.
type Program struct {
	Name        flexv1.PropositionName
	Description string
	// Market names the market whose prices steer it (price_curve's events carry them).
	Market     string
	AssetTypes []flexv1.AssetType
	// Created and Modified are when the Proposition was declared and last changed.
	Created, Modified time.Time
}

// Programs are the propositions offered, in the API's order (limited_pause,
// full_asset_schedule_control, price_curve). The catalogue is cluster-wide and holds at most
// one Proposition per proposition name (its CRD's enum), so the cache's list is bounded.
func (s *Service) Programs(ctx context.Context) ([]Program, error) {
	list := &flexv1.PropositionList{}
	if err := s.Households.Cache.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]Program, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			out = append(out, programOf(&list.Items[i]))
		}
	}
	slices.SortFunc(out, func(a, b Program) int {
		return slices.Index(flexv1.AllPropositions, a.Name) - slices.Index(flexv1.AllPropositions, b.Name)
	})
	return out, nil
}

// Program is the program named id (a proposition's name), or ErrProgramNotFound.
func (s *Service) Program(ctx context.Context, id string) (Program, error) {
	programs, err := s.Programs(ctx)
	if err != nil {
		return Program{}, err
	}
	for _, p := range programs {
		if string(p.Name) == id {
			return p, nil
		}
	}
	return Program{}, ErrProgramNotFound
}

func programOf(p *flexv1.Proposition) Program {
	modified := p.CreationTimestamp.Time
	for _, m := range p.ManagedFields {
		if m.Time != nil && m.Time.After(modified) {
			modified = m.Time.Time
		}
	}
	return Program{Name: p.Spec.Proposition, Description: p.Spec.Description, Market: p.Spec.MarketOrDefault(),
		AssetTypes: slices.Clone(p.Spec.AssetTypes), Created: p.CreationTimestamp.Time, Modified: modified}
}

package app

import (
	"context"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/householdstore"
)

// The asset lifecycle (docs/api.md, "The site and asset lifecycle"): an asset is
// created for a site, its fields filled in, deleted, and the organisation's assets paged.
// Each change is the change kubectl would make to the Asset object (an update with optimistic
// concurrency, a delete), so the same schema and admission rules judge it and the same
// controllers follow it: the Site controller re-evaluates the site's eligibility, the
// Enrolment controller its phase.

// AssetPage answers a page of the organisation's assets.
type AssetPage struct {
	Assets         []AssetRecord `json:"assets"`
	TotalNumAssets int           `json:"total_num_assets"`
	TotalNumPages  int           `json:"total_num_pages"`
	PageNumber     int           `json:"page_number"`
}

// CreateAsset registers a new asset at the caller's site siteID; an asset of the
// organisation with the same external id is a conflict.
func (s *Service) CreateAsset(ctx context.Context, p *auth.Principal, siteID string, in AssetInput) (AssetRecord, error) {
	site, err := s.site(ctx, p, siteID)
	if err != nil {
		return AssetRecord{}, err
	}
	rules, err := householdstore.LoadRules(ctx, s.Cache)
	if err != nil {
		return AssetRecord{}, err
	}
	if err := knownModel(rules, in.Model, ""); err != nil {
		return AssetRecord{}, err
	}
	var asset *flexv1.Asset
	err = s.transact(ctx, func(st store, log *writeLog) error {
		existing, err := st.assetByExternalID(ctx, p.Namespace, in.ExternalID)
		if err != nil {
			return err
		}
		if existing != nil && !log.wasCreated(existing) {
			return Fail(Conflict, "Asset with external_id %q already exists", in.ExternalID)
		}
		if existing != nil {
			asset = existing
			return nil
		}
		asset = newAsset(site, in) // with its site as controller
		return s.create(ctx, log, asset)
	})
	if err != nil {
		return AssetRecord{}, err
	}
	return assetRecord(asset, site.Labels[flexv1.IDLabel]), nil
}

// GetAsset is the organisation's asset with API id id.
func (s *Service) GetAsset(ctx context.Context, p *auth.Principal, id string) (AssetRecord, error) {
	asset, err := s.FindAsset(ctx, p, id, false)
	return s.assetAnswer(ctx, asset, err)
}

// GetAssetByExternalID is the organisation's asset with the external id.
func (s *Service) GetAssetByExternalID(ctx context.Context, p *auth.Principal, externalID string) (AssetRecord, error) {
	asset, err := s.FindAsset(ctx, p, externalID, true)
	return s.assetAnswer(ctx, asset, err)
}

// FindAsset is the organisation's live asset with API id ref (its external id when external),
// from the cache's index, never the API server (it could only LIST the namespace): an unknown
// id is ErrAssetNotFound for a map lookup. A write through the API answers once this replica's
// cache has it (awaitCache): only an asset made elsewhere a moment ago can be missed.
func (s *Service) FindAsset(ctx context.Context, p *auth.Principal, ref string, external bool) (*flexv1.Asset, error) {
	find := s.store(false).assetByID
	if external {
		find = s.store(false).assetByExternalID
	}
	if asset, err := find(ctx, p.Namespace, ref); err != nil || asset != nil {
		return asset, err
	}
	return nil, ErrAssetNotFound
}

// AssetToRead is FindAsset by API id for a use case that only reads the asset (the prices' and
// schedules' reads): from the cache it is the cached object itself, not a deep copy, and must
// not be changed.
func (s *Service) AssetToRead(ctx context.Context, p *auth.Principal, id string) (*flexv1.Asset, error) {
	ri := s.reads  // the stores at hand: no wait
	if ri == nil { // none: the cache's lookup, made only then (not on every read, to be dropped)
		ri = &readIndexes{lookup: s.store(false).lookup}
	}
	found, err := ri.lookup.AssetsByID(ctx, p.Namespace, id)
	if err != nil {
		return nil, err
	}
	if a := liveAsset(found); a != nil {
		return a, nil
	}
	return nil, ErrAssetNotFound
}

// assetAnswer maps a found asset onto its record, naming its site's API id.
func (s *Service) assetAnswer(ctx context.Context, asset *flexv1.Asset, err error) (AssetRecord, error) {
	if err != nil {
		return AssetRecord{}, err
	}
	if asset == nil {
		return AssetRecord{}, ErrAssetNotFound
	}
	site, err := s.store(false).siteByName(ctx, asset.Namespace, asset.Spec.SiteName)
	if err != nil {
		return AssetRecord{}, err
	}
	siteID := ""
	if site != nil {
		siteID = site.Labels[flexv1.IDLabel]
	}
	return assetRecord(asset, siteID), nil
}

// UpdateAsset fills in the fields in sends (household.MergeAsset: what is left out, null or
// empty keeps its stored value) and answers the asset record. A request that changes nothing
// writes nothing.
func (s *Service) UpdateAsset(ctx context.Context, p *auth.Principal, id string, in household.AssetFields) (AssetRecord, error) {
	var rules eligibility.Rules
	if in.Model != nil { // the catalogue is read only to check a model sent
		var err error
		if rules, err = householdstore.LoadRules(ctx, s.Cache); err != nil {
			return AssetRecord{}, err
		}
	}
	var out AssetRecord
	err := s.transact(ctx, func(st store, log *writeLog) error {
		current, err := s.findAsset(ctx, st, p.Namespace, id)
		if err != nil {
			return err
		}
		if current == nil {
			return ErrAssetNotFound
		}
		if err := knownModel(rules, in.Model, ""); err != nil {
			return err
		}
		// Everything the answer needs is read before the write: a read failing after it would
		// answer an error for a change that was made.
		site, err := s.siteOf(ctx, st, current)
		if err != nil {
			return err
		}
		updated := current.DeepCopy()
		changed := household.MergeAsset(&updated.Spec, in)
		if len(changed) == 0 {
			// Nothing to write, provided the copy judged is the stored one: a cached copy may
			// not show a change made a moment ago, and what was sent would then not be stored.
			err = s.confirmStored(ctx, st, current)
		} else {
			err = s.write(ctx, log, updated, current, changed)
		}
		siteID := ""
		if site != nil {
			siteID = site.Labels[flexv1.IDLabel]
		}
		out = assetRecord(updated, siteID)
		return err
	})
	if err != nil {
		return AssetRecord{}, err
	}
	return out, nil
}

// DeleteAsset deletes the asset and returns once this replica's cache no longer holds it, so
// that the site's eligibility read next no longer counts it. An end user may delete only an
// asset of their own site.
func (s *Service) DeleteAsset(ctx context.Context, p *auth.Principal, id string) error {
	if p.Kind == auth.KindEndUser {
		asset, err := s.store(false).assetByID(ctx, p.Namespace, id)
		if err != nil {
			return err
		}
		if asset == nil || asset.Spec.SiteName != p.SiteName {
			return ErrAssetNotFound
		}
		if _, err := s.OwnSite(ctx, p); err != nil {
			return err
		}
	}
	var gone *flexv1.Asset
	err := s.transact(ctx, func(st store, log *writeLog) error {
		asset, err := s.findAsset(ctx, st, p.Namespace, id)
		if err != nil {
			return err
		}
		if asset == nil {
			return ErrAssetNotFound
		}
		if err := s.releaseInFlight(ctx, st, log, asset); err != nil {
			return err
		}
		gone = asset
		return s.deleteAssetObject(ctx, asset)
	})
	if err != nil {
		return err
	}
	s.awaitCache(ctx, nil, []client.Object{gone})
	return nil
}

// ListAssets answers a page of the organisation's live assets, ordered by object name. The
// organisation's assets are listed from the cache without a copy (read-only); records are
// built for the page only.
func (s *Service) ListAssets(ctx context.Context, p *auth.Principal, pg Paging) (AssetPage, error) {
	list := &flexv1.AssetList{}
	if err := s.Cache.List(ctx, list, client.InNamespace(p.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return AssetPage{}, err
	}
	live := make([]*flexv1.Asset, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			live = append(live, &list.Items[i])
		}
	}
	slices.SortFunc(live, func(a, b *flexv1.Asset) int { return strings.Compare(a.Name, b.Name) })
	w := pg.window(len(live))
	out := AssetPage{Assets: make([]AssetRecord, 0, w.to-w.from), TotalNumAssets: len(live),
		TotalNumPages: w.totalPages, PageNumber: w.number}
	siteIDs := map[string]string{}
	for _, a := range live[w.from:w.to] {
		siteID, ok := siteIDs[a.Spec.SiteName]
		if !ok {
			site := &flexv1.Site{}
			err := s.Cache.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: a.Spec.SiteName}, site,
				client.UnsafeDisableDeepCopy)
			if client.IgnoreNotFound(err) != nil {
				return AssetPage{}, err
			}
			siteID = site.Labels[flexv1.IDLabel] // "" for a site that does not exist (an asset declared alone)
			siteIDs[a.Spec.SiteName] = siteID
		}
		out.Assets = append(out.Assets, assetRecord(a, siteID))
	}
	return out, nil
}

// findAsset finds the organisation's live asset with the API id for a write, by FindAsset's
// rule: from the cache, and for a fresh store (after a write conflict) its stored version by name.
func (s *Service) findAsset(ctx context.Context, st store, ns, id string) (*flexv1.Asset, error) {
	asset, err := s.store(false).assetByID(ctx, ns, id)
	if err != nil || asset == nil || st.cached {
		return asset, err
	}
	current := &flexv1.Asset{}
	if err := st.r.Get(ctx, client.ObjectKeyFromObject(asset), current); client.IgnoreNotFound(err) != nil {
		return nil, err
	} else if err != nil || current.Labels[flexv1.IDLabel] != id || !current.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	return current, nil
}

// siteOf reads the asset's site: in st, and past the cache when the cache does not have it.
// It is nil when the site does not exist (an asset declared without one).
func (s *Service) siteOf(ctx context.Context, st store, asset *flexv1.Asset) (*flexv1.Site, error) {
	site, err := st.siteByName(ctx, asset.Namespace, asset.Spec.SiteName)
	if err == nil && site == nil && st.cached {
		site, err = s.store(true).siteByName(ctx, asset.Namespace, asset.Spec.SiteName)
	}
	return site, err
}

// knownModel refuses an asset model the catalogue does not have (where says which of the
// request's assets), as every API door does (kubectl only warns: see the asset webhook).
func knownModel(rules eligibility.Rules, model *string, where string) error {
	if model == nil {
		return nil
	}
	if _, ok := rules.Model(*model); !ok {
		return Fail(NotFound, "Asset model %q not found%s", *model, where)
	}
	return nil
}

// confirmStored makes sure a decision to write nothing rests on the asset as stored now: one
// GET, and a cached copy that is behind means deciding again from fresh reads.
func (s *Service) confirmStored(ctx context.Context, st store, asset *flexv1.Asset) error {
	if !st.cached {
		return nil
	}
	current := &flexv1.Asset{}
	err := s.APIReader.Get(ctx, client.ObjectKeyFromObject(asset), current)
	switch {
	case apierrors.IsNotFound(err):
		return errRetry
	case err != nil:
		return err
	case current.ResourceVersion != asset.ResourceVersion:
		return errRetry
	}
	return nil
}

// releaseInFlight releases the asset from its site's in-flight marker when the site is not
// evaluated yet (household.ReleaseInFlightAsset), so that the Site controller does not wait
// for the deleted asset and then take the site for abandoned. The marker is released first,
// and seen by this replica's cache before the asset goes.
func (s *Service) releaseInFlight(ctx context.Context, st store, log *writeLog, asset *flexv1.Asset) error {
	// A site created a moment ago (which siteOf reads past the cache) is the one most likely
	// to be still in flight.
	site, err := s.siteOf(ctx, st, asset)
	if err != nil || site == nil || !site.DeletionTimestamp.IsZero() {
		return err
	}
	released := site.DeepCopy()
	// The marker's deadline is on the wall clock, which the Site controller reads too.
	if !household.ReleaseInFlightAsset(released, asset.Name, time.Now()) {
		return nil
	}
	if err := s.update(ctx, log, released, site); err != nil {
		return err
	}
	s.awaitCache(ctx, []client.Object{released}, nil)
	return nil
}

// deleteAssetObject deletes the asset found, and only that one (not a namesake created since,
// with another id). Losing a race to another delete or a re-creation is errRetry: the asset
// is looked for again, and is not found. A failure that may have deleted it anyway (a
// timeout) is checked with a fresh read: an asset that is gone was deleted.
func (s *Service) deleteAssetObject(ctx context.Context, asset *flexv1.Asset) error {
	uid := asset.UID
	err := s.Client.Delete(ctx, asset, client.Preconditions{UID: &uid})
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return errRetry
	case !mayHaveApplied(err):
		return err
	}
	current := &flexv1.Asset{}
	if gerr := s.APIReader.Get(ctx, client.ObjectKeyFromObject(asset), current); apierrors.IsNotFound(gerr) ||
		(gerr == nil && (current.UID != uid || !current.DeletionTimestamp.IsZero())) {
		return nil
	}
	return err
}

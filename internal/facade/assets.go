package facade

import (
	"context"
	"net/http"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/validation"
)

var errAssetNotFound = fail(http.StatusNotFound, "Asset not found or not authorized")

func (s *Server) createAsset(r *http.Request, p *auth.Principal) (any, error) {
	body, err := decodeJSON(r)
	if err != nil {
		return nil, err
	}
	f := &fields{}
	in := parseAsset(f, body, []any{"body"}, s.Now())
	rawSiteID, _ := f.str(body, []any{"body"}, "site_id", true)
	if err := f.err(); err != nil {
		return nil, err
	}
	ctx := r.Context()
	site, err := s.siteForID(ctx, p, rawSiteID, []any{"body", "site_id"})
	if err != nil {
		return nil, err
	}
	rules, err := household.LoadRules(ctx, s.Cache)
	if err != nil {
		return nil, err
	}
	if err := knownModel(rules, in.Model); err != nil {
		return nil, err
	}
	var asset *flexv1.Asset
	err = s.transact(ctx, func(st store, log *writeLog) error {
		existing, err := st.assetByExternalID(ctx, p.Namespace, in.ExternalID)
		if err != nil {
			return err
		}
		if existing != nil && !log.wasCreated(existing) {
			return fail(http.StatusConflict, "Asset with external_id %q already exists", in.ExternalID)
		}
		if existing != nil {
			asset = existing
			return nil
		}
		asset = newAsset(p.Namespace, site.Name, in)
		return s.create(ctx, log, asset)
	})
	if err != nil {
		return nil, err
	}
	return assetRecord(asset, site.Labels[flexv1.IDLabel]), nil
}

func (s *Server) getAsset(r *http.Request, p *auth.Principal) (any, error) {
	id, err := validation.ParseUUID(r.PathValue("asset_id"))
	if err != nil {
		f := &fields{}
		f.addValidation(err, []any{"path", "asset_id"})
		return nil, f.err()
	}
	ctx := r.Context()
	asset, err := s.store(false).assetByID(ctx, p.Namespace, id)
	if err == nil && asset == nil {
		asset, err = s.store(true).assetByID(ctx, p.Namespace, id)
	}
	return s.assetAnswer(ctx, asset, err)
}

func (s *Server) getAssetByExternalID(r *http.Request, p *auth.Principal) (any, error) {
	ctx := r.Context()
	externalID := r.PathValue("external_id")
	asset, err := s.store(false).assetByExternalID(ctx, p.Namespace, externalID)
	if err == nil && asset == nil {
		asset, err = s.store(true).assetByExternalID(ctx, p.Namespace, externalID)
	}
	return s.assetAnswer(ctx, asset, err)
}

// assetAnswer maps a found asset onto its record, naming its site's API id.
func (s *Server) assetAnswer(ctx context.Context, asset *flexv1.Asset, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	if asset == nil {
		return nil, errAssetNotFound
	}
	site, err := s.store(false).siteByName(ctx, asset.Namespace, asset.Spec.SiteName)
	if err != nil {
		return nil, err
	}
	siteID := ""
	if site != nil {
		siteID = site.Labels[flexv1.IDLabel]
	}
	return assetRecord(asset, siteID), nil
}

func (s *Server) validateMPAN(r *http.Request, _ *auth.Principal) (any, error) {
	body, err := decodeJSON(r)
	if err != nil {
		return nil, err
	}
	f := &fields{}
	mpan, _ := f.str(body, []any{"body"}, "mpan", true)
	if err := f.err(); err != nil {
		return nil, err
	}
	if _, err := validation.NormaliseMPAN(mpan); err != nil {
		return nil, &apiError{status: http.StatusBadRequest, detail: []string{err.Error()}}
	}
	return map[string]bool{"isValid": true}, nil
}

package vtn

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/vtnstore"
)

// The bounds on what an organisation registers (docs/openadr.md, "Limits"); a registration
// past one is a conflict (409).
const (
	// MaxVENsPerOrganisation bounds an organisation's VENs.
	MaxVENsPerOrganisation = 1000
	// MaxResourcesPerClient bounds the resources the VENs of one API client hold together:
	// what such a client sees (Viewer.Assets) is at most this many assets.
	MaxResourcesPerClient = vtnstore.MaxHeld
)

// Values is one of the document's valuesMap objects (a target or an attribute).
type Values = vtnstore.Values

// VEN is a VEN as registered.
type VEN = vtnstore.VEN

// VENInput is a VEN as a client sends it.
type VENInput struct {
	Name       string
	Attributes []Values
	Targets    []Values
}

// Search is a search of VENs or of a VEN's resources: a name (empty: any), a target (type
// and any of values), and the page.
type Search struct {
	Name         string
	TargetType   string
	TargetValues []string
	Skip, Limit  int
}

// The target types that name a VEN and a resource themselves (the Definition's): a search by
// them matches the object's name as well as its targets.
const (
	TargetVENName      = "VEN_NAME"
	TargetResourceName = "RESOURCE_NAME"
)

// The refusals of the VEN and resource use cases.
var (
	// ErrVENNotFound answers a VEN that is not the caller's to see: none of that id, another
	// organisation's, or (to a VEN client) another client's.
	ErrVENNotFound = app.Fail(app.NotFound, "VEN not found")
	// ErrResourceNotFound answers likewise for a resource.
	ErrResourceNotFound = app.Fail(app.NotFound, "Resource not found")
)

// failed translates a store error: unavailable is ErrUnavailable; the store's refusals are
// the caller's.
func failed(err error, notFound error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, db.ErrUnavailable):
		return ErrUnavailable
	case errors.Is(err, vtnstore.ErrNotFound):
		return notFound
	}
	return err
}

func organisationOnly(p *auth.Principal) error {
	if p == nil || p.Kind != auth.KindOrganisation {
		return app.Fail(app.Forbidden, "The OpenADR door serves an organisation's API clients")
	}
	return nil
}

// CreateVEN registers a VEN owned by p's client: its name unique in the organisation
// (Conflict), at most MaxVENsPerOrganisation VENs (Conflict).
func (s *Service) CreateVEN(ctx context.Context, p *auth.Principal, in VENInput) (VEN, error) {
	if err := organisationOnly(p); err != nil {
		return VEN{}, err
	}
	now := s.stamp()
	v := VEN{ID: newID(), ClientName: p.ClientName, Name: in.Name, Attributes: in.Attributes, Targets: in.Targets,
		Created: now, Modified: now}
	err := s.Store.CreateVEN(ctx, p.Namespace, v, MaxVENsPerOrganisation)
	switch {
	case errors.Is(err, vtnstore.ErrNameTaken):
		return VEN{}, venNameTaken(in.Name)
	case errors.Is(err, vtnstore.ErrFull):
		return VEN{}, app.Fail(app.Conflict, "The organisation has %d VENs, the most it may register", MaxVENsPerOrganisation)
	case err != nil:
		return VEN{}, failed(err, ErrVENNotFound)
	}
	return v, nil
}

func venNameTaken(name string) error {
	return app.Fail(app.Conflict, "venName %q is another VEN's of the organisation", name)
}

// VEN is the VEN id as p may see it.
func (s *Service) VEN(ctx context.Context, p *auth.Principal, id string) (VEN, error) {
	if err := organisationOnly(p); err != nil {
		return VEN{}, err
	}
	uid, err := uuid.Parse(id)
	if err != nil {
		return VEN{}, ErrVENNotFound
	}
	v, err := s.Store.VEN(ctx, p.Namespace, uid)
	if err != nil {
		return VEN{}, failed(err, ErrVENNotFound)
	}
	if !BusinessLogic(p) && v.ClientName != p.ClientName {
		return VEN{}, ErrVENNotFound
	}
	return v, nil
}

// VENs answers a page of the VENs p sees that q names.
func (s *Service) VENs(ctx context.Context, p *auth.Principal, q Search) ([]VEN, error) {
	if err := organisationOnly(p); err != nil {
		return nil, err
	}
	sq := vtnstore.Query{Organisation: p.Namespace, Name: q.Name, TargetType: q.TargetType, TargetValues: q.TargetValues,
		NameTarget: TargetVENName, Skip: q.Skip, Limit: q.Limit}
	if !BusinessLogic(p) {
		sq.ClientName = p.ClientName
	}
	out, err := s.Store.VENs(ctx, sq)
	return out, failed(err, ErrVENNotFound)
}

// UpdateVEN replaces the VEN's name, attributes and targets.
func (s *Service) UpdateVEN(ctx context.Context, p *auth.Principal, id string, in VENInput) (VEN, error) {
	v, err := s.VEN(ctx, p, id)
	if err != nil {
		return VEN{}, err
	}
	v.Name, v.Attributes, v.Targets, v.Modified = in.Name, in.Attributes, in.Targets, s.stamp()
	out, err := s.Store.UpdateVEN(ctx, p.Namespace, v)
	if errors.Is(err, vtnstore.ErrNameTaken) {
		return VEN{}, venNameTaken(in.Name)
	}
	return out, failed(err, ErrVENNotFound)
}

// DeleteVEN deletes the VEN; its resources are released.
func (s *Service) DeleteVEN(ctx context.Context, p *auth.Principal, id string) (VEN, error) {
	v, err := s.VEN(ctx, p, id)
	if err != nil {
		return VEN{}, err
	}
	out, err := s.Store.DeleteVEN(ctx, p.Namespace, v.ID)
	return out, failed(err, ErrVENNotFound)
}

// Resource is a resource as registered, with what Flexsite knows of its asset.
type Resource struct {
	vtnstore.Resource
	// Asset is the asset's type and ratings (nil: the asset is gone since).
	Asset *AssetFacts
}

// AssetFacts are what a VEN is told of a resource's asset: its type and ratings, nothing of
// its site or household.
type AssetFacts struct {
	Type       flexv1.AssetType
	PowerW     *int64
	CapacityWh *int64
}

// ResourceInput is a resource as a client sends it: Name is one of the organisation's
// assets' asset_id.
type ResourceInput struct {
	Name       string
	Attributes []Values
	Targets    []Values
}

// asset is the organisation's asset named by a resource, or a refusal naming resourceName.
func (s *Service) asset(ctx context.Context, p *auth.Principal, name string) (*AssetFacts, error) {
	a, err := s.Households.FindAsset(ctx, p, name, false)
	if errors.Is(err, app.ErrAssetNotFound) {
		return nil, app.InvalidFields(app.Field("resourceName must be the asset_id of one of the organisation's assets",
			"value_error", "body", "resourceName"))
	}
	if err != nil {
		return nil, err
	}
	return &AssetFacts{Type: a.Spec.Type, PowerW: a.Spec.PowerW, CapacityWh: a.Spec.CapacityWh}, nil
}

// facts is the asset's facts for an answer (nil when it is gone).
func (s *Service) facts(ctx context.Context, p *auth.Principal, name string) (*AssetFacts, error) {
	f, err := s.asset(ctx, p, name)
	var ae *app.Error
	if errors.As(err, &ae) && ae.Kind == app.Invalid {
		return nil, nil
	}
	return f, err
}

func heldElsewhere(name string) error {
	return app.Fail(app.Conflict, "resourceName %q: the asset is held by another VEN of the organisation", name)
}

// CreateResource registers one of the organisation's assets as a resource of the VEN venID
// (which p must see): an unknown asset is Invalid naming resourceName; an asset another VEN of
// the organisation holds is a Conflict; so is the bound MaxResourcesPerClient.
func (s *Service) CreateResource(ctx context.Context, p *auth.Principal, venID string, in ResourceInput) (Resource, error) {
	v, err := s.VEN(ctx, p, venID)
	if err != nil {
		return Resource{}, err
	}
	facts, err := s.asset(ctx, p, in.Name)
	if err != nil {
		return Resource{}, err
	}
	now := s.stamp()
	r := vtnstore.Resource{ID: newID(), VENID: v.ID, Name: in.Name, Attributes: in.Attributes, Targets: in.Targets,
		Created: now, Modified: now}
	err = s.Store.CreateResource(ctx, p.Namespace, r, MaxResourcesPerClient)
	switch {
	case errors.Is(err, vtnstore.ErrHeld):
		return Resource{}, heldElsewhere(in.Name)
	case errors.Is(err, vtnstore.ErrFull):
		return Resource{}, app.Fail(app.Conflict, "The VENs of client %q hold %d resources, the most they may", v.ClientName,
			MaxResourcesPerClient)
	case err != nil:
		return Resource{}, failed(err, ErrVENNotFound)
	}
	return Resource{Resource: r, Asset: facts}, nil
}

// Resource is the VEN's resource id, as p may see it.
func (s *Service) Resource(ctx context.Context, p *auth.Principal, venID, id string) (Resource, error) {
	v, err := s.VEN(ctx, p, venID)
	if err != nil {
		return Resource{}, err
	}
	uid, err := uuid.Parse(id)
	if err != nil {
		return Resource{}, ErrResourceNotFound
	}
	r, err := s.Store.Resource(ctx, p.Namespace, v.ID, uid)
	if err != nil {
		return Resource{}, failed(err, ErrResourceNotFound)
	}
	facts, err := s.facts(ctx, p, r.Name)
	if err != nil {
		return Resource{}, err
	}
	return Resource{Resource: r, Asset: facts}, nil
}

// Resources answers a page of the VEN's resources that q names.
func (s *Service) Resources(ctx context.Context, p *auth.Principal, venID string, q Search) ([]Resource, error) {
	v, err := s.VEN(ctx, p, venID)
	if err != nil {
		return nil, err
	}
	rs, err := s.Store.Resources(ctx, v.ID, vtnstore.Query{Organisation: p.Namespace, Name: q.Name,
		TargetType: q.TargetType, TargetValues: q.TargetValues, NameTarget: TargetResourceName, Skip: q.Skip, Limit: q.Limit})
	if err != nil {
		return nil, failed(err, ErrVENNotFound)
	}
	out := make([]Resource, len(rs))
	for i, r := range rs {
		facts, err := s.facts(ctx, p, r.Name)
		if err != nil {
			return nil, err
		}
		out[i] = Resource{Resource: r, Asset: facts}
	}
	return out, nil
}

// UpdateResource replaces the resource's name (another asset: judged as on creation),
// attributes and targets.
func (s *Service) UpdateResource(ctx context.Context, p *auth.Principal, venID, id string, in ResourceInput) (Resource, error) {
	cur, err := s.Resource(ctx, p, venID, id)
	if err != nil {
		return Resource{}, err
	}
	facts := cur.Asset
	if in.Name != cur.Name {
		if facts, err = s.asset(ctx, p, in.Name); err != nil {
			return Resource{}, err
		}
	}
	r := cur.Resource
	r.Name, r.Attributes, r.Targets, r.Modified = in.Name, in.Attributes, in.Targets, s.stamp()
	out, err := s.Store.UpdateResource(ctx, p.Namespace, r)
	if errors.Is(err, vtnstore.ErrHeld) {
		return Resource{}, heldElsewhere(in.Name)
	}
	if err != nil {
		return Resource{}, failed(err, ErrResourceNotFound)
	}
	return Resource{Resource: out, Asset: facts}, nil
}

// DeleteResource deletes the resource: its asset is released.
func (s *Service) DeleteResource(ctx context.Context, p *auth.Principal, venID, id string) (Resource, error) {
	cur, err := s.Resource(ctx, p, venID, id)
	if err != nil {
		return Resource{}, err
	}
	out, err := s.Store.DeleteResource(ctx, p.Namespace, cur.VENID, cur.ID)
	if err != nil {
		return Resource{}, failed(err, ErrResourceNotFound)
	}
	return Resource{Resource: out, Asset: cur.Asset}, nil
}

// stamp is now as the records keep it (to the microsecond, as PostgreSQL does), so that an
// object answered on its creation reads the same as it does later.
func (s *Service) stamp() time.Time { return s.Now().UTC().Truncate(time.Microsecond) }

// newID is a new object's id: a UUIDv7, so that objects created in the same microsecond
// still page in the order they were created.
func newID() uuid.UUID { return uuid.Must(uuid.NewV7()) }

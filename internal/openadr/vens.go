package openadr

import (
	"net/http"
	"strconv"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app/vtn"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/web"
)

// The attributes a resource's answer carries of its asset (docs/openadr.md, "Resources"):
// ASSET_TYPE is the asset's type as the REST API spells it; MAX_POWER_CONSUMPTION and
// MAX_POWER_EXPORT are the Definition's, its power rating in kW. A client's attributes of these
// types are Flexsite's to say, and are not kept.
const (
	AttributeAssetType           = "ASSET_TYPE"
	AttributeMaxPowerConsumption = "MAX_POWER_CONSUMPTION"
	AttributeMaxPowerExport      = "MAX_POWER_EXPORT"
)

func (d *Door) venSearch(r *http.Request, nameParam string) (vtn.Search, error) {
	s, err := parseSearch(r)
	if err != nil {
		return vtn.Search{}, err
	}
	name := r.URL.Query().Get(nameParam)
	if name != "" {
		if err := checkText(nameParam, name); err != nil {
			return vtn.Search{}, err
		}
	}
	return vtn.Search{Name: name, TargetType: s.TargetType, TargetValues: s.TargetValues, Skip: s.Skip, Limit: s.Limit}, nil
}

func (d *Door) searchVens(r *http.Request, p *auth.Principal) (any, error) {
	q, err := d.venSearch(r, "venName")
	if err != nil {
		return nil, err
	}
	vens, err := d.VTN.VENs(r.Context(), p, q)
	if err != nil {
		return nil, err
	}
	out := make([]oadr.Ven, len(vens))
	for i, v := range vens {
		out[i] = venShape(v)
	}
	return out, nil
}

// venIn reads a VEN's body.
func venIn(r *http.Request) (vtn.VENInput, error) {
	var body oadr.Ven
	if err := decodeBody(r, maxObjectBody, &body); err != nil {
		return vtn.VENInput{}, err
	}
	if err := checkObjectType("objectType", body.ObjectType, oadr.VenObjectTypeVEN); err != nil {
		return vtn.VENInput{}, err
	}
	if err := checkText("venName", body.VenName); err != nil {
		return vtn.VENInput{}, err
	}
	if body.Resources != nil && len(*body.Resources) > 0 {
		return vtn.VENInput{}, badRequest("resources are registered one by one, under /vens/{venID}/resources")
	}
	attrs, err := valuesIn("attributes", body.Attributes)
	if err != nil {
		return vtn.VENInput{}, err
	}
	targets, err := valuesIn("targets", body.Targets)
	if err != nil {
		return vtn.VENInput{}, err
	}
	return vtn.VENInput{Name: body.VenName, Attributes: attrs, Targets: targets}, nil
}

func (d *Door) createVen(r *http.Request, p *auth.Principal) (any, error) {
	in, err := venIn(r)
	if err != nil {
		return nil, err
	}
	v, err := d.VTN.CreateVEN(r.Context(), p, in)
	if err != nil {
		return nil, err
	}
	return web.WithStatus{Status: http.StatusCreated, Body: venShape(v)}, nil
}

func (d *Door) getVen(r *http.Request, p *auth.Principal) (any, error) {
	v, err := d.VTN.VEN(r.Context(), p, r.PathValue("venID"))
	if err != nil {
		return nil, err
	}
	return venShape(v), nil
}

func (d *Door) updateVen(r *http.Request, p *auth.Principal) (any, error) {
	in, err := venIn(r)
	if err != nil {
		return nil, err
	}
	v, err := d.VTN.UpdateVEN(r.Context(), p, r.PathValue("venID"), in)
	if err != nil {
		return nil, err
	}
	return venShape(v), nil
}

func (d *Door) deleteVen(r *http.Request, p *auth.Principal) (any, error) {
	v, err := d.VTN.DeleteVEN(r.Context(), p, r.PathValue("venID"))
	if err != nil {
		return nil, err
	}
	return venShape(v), nil
}

func venShape(v vtn.VEN) oadr.Ven {
	id := v.ID.String()
	created, modified := v.Created.UTC(), v.Modified.UTC()
	objectType := oadr.VenObjectTypeVEN
	return oadr.Ven{Id: &id, CreatedDateTime: &created, ModificationDateTime: &modified, ObjectType: &objectType,
		VenName: v.Name, Attributes: valuesOut(v.Attributes), Targets: valuesOut(v.Targets)}
}

func (d *Door) searchResources(r *http.Request, p *auth.Principal) (any, error) {
	q, err := d.venSearch(r, "resourceName")
	if err != nil {
		return nil, err
	}
	rs, err := d.VTN.Resources(r.Context(), p, r.PathValue("venID"), q)
	if err != nil {
		return nil, err
	}
	out := make([]oadr.Resource, len(rs))
	for i, res := range rs {
		out[i] = resourceShape(res)
	}
	return out, nil
}

// resourceIn reads a resource's body: the attributes Flexsite says of the asset are dropped.
func resourceIn(r *http.Request) (vtn.ResourceInput, error) {
	var body oadr.Resource
	if err := decodeBody(r, maxObjectBody, &body); err != nil {
		return vtn.ResourceInput{}, err
	}
	if err := checkObjectType("objectType", body.ObjectType, oadr.ResourceObjectTypeRESOURCE); err != nil {
		return vtn.ResourceInput{}, err
	}
	if err := checkText("resourceName", body.ResourceName); err != nil {
		return vtn.ResourceInput{}, err
	}
	if body.VenID != nil && *body.VenID != r.PathValue("venID") {
		return vtn.ResourceInput{}, badRequest("venID must be the VEN of the path, %s", r.PathValue("venID"))
	}
	attrs, err := valuesIn("attributes", body.Attributes)
	if err != nil {
		return vtn.ResourceInput{}, err
	}
	kept := attrs[:0:0]
	for _, a := range attrs {
		if a.Type != AttributeAssetType && a.Type != AttributeMaxPowerConsumption && a.Type != AttributeMaxPowerExport {
			kept = append(kept, a)
		}
	}
	if attrs == nil {
		kept = nil
	}
	targets, err := valuesIn("targets", body.Targets)
	if err != nil {
		return vtn.ResourceInput{}, err
	}
	return vtn.ResourceInput{Name: body.ResourceName, Attributes: kept, Targets: targets}, nil
}

func (d *Door) createResource(r *http.Request, p *auth.Principal) (any, error) {
	in, err := resourceIn(r)
	if err != nil {
		return nil, err
	}
	res, err := d.VTN.CreateResource(r.Context(), p, r.PathValue("venID"), in)
	if err != nil {
		return nil, err
	}
	return web.WithStatus{Status: http.StatusCreated, Body: resourceShape(res)}, nil
}

func (d *Door) getResource(r *http.Request, p *auth.Principal) (any, error) {
	res, err := d.VTN.Resource(r.Context(), p, r.PathValue("venID"), r.PathValue("resourceID"))
	if err != nil {
		return nil, err
	}
	return resourceShape(res), nil
}

func (d *Door) updateResource(r *http.Request, p *auth.Principal) (any, error) {
	in, err := resourceIn(r)
	if err != nil {
		return nil, err
	}
	res, err := d.VTN.UpdateResource(r.Context(), p, r.PathValue("venID"), r.PathValue("resourceID"), in)
	if err != nil {
		return nil, err
	}
	return resourceShape(res), nil
}

func (d *Door) deleteResource(r *http.Request, p *auth.Principal) (any, error) {
	res, err := d.VTN.DeleteResource(r.Context(), p, r.PathValue("venID"), r.PathValue("resourceID"))
	if err != nil {
		return nil, err
	}
	return resourceShape(res), nil
}

// resourceShape is a resource in the document's shape: its attributes are its asset's
// (assetAttributes), then the client's own.
func resourceShape(res vtn.Resource) oadr.Resource {
	id, venID := res.ID.String(), res.VENID.String()
	created, modified := res.Created.UTC(), res.Modified.UTC()
	objectType := oadr.ResourceObjectTypeRESOURCE
	attrs := append(assetAttributes(res.Asset), res.Attributes...)
	out := oadr.Resource{Id: &id, VenID: &venID, CreatedDateTime: &created, ModificationDateTime: &modified,
		ObjectType: &objectType, ResourceName: res.Name, Targets: valuesOut(res.Targets)}
	if len(attrs) > 0 {
		out.Attributes = valuesOut(attrs)
	}
	return out
}

// assetAttributes are what a resource's answer says of its asset: its type, and its power
// rating in kW as the Definition's MAX_POWER_CONSUMPTION (and MAX_POWER_EXPORT for what can
// export: batteries, PV inverters; PV inverters only export).
func assetAttributes(a *vtn.AssetFacts) []vtn.Values {
	if a == nil {
		return nil
	}
	out := []vtn.Values{{Type: AttributeAssetType, Values: []any{string(a.Type)}}}
	if a.PowerW != nil {
		kw, _ := strconv.ParseFloat(strconv.FormatFloat(float64(*a.PowerW)/1000, 'f', 3, 64), 64)
		if a.Type != flexv1.AssetTypePVInverter {
			out = append(out, vtn.Values{Type: AttributeMaxPowerConsumption, Values: []any{kw}})
		}
		if a.Type == flexv1.AssetTypeBattery || a.Type == flexv1.AssetTypePVInverter {
			out = append(out, vtn.Values{Type: AttributeMaxPowerExport, Values: []any{kw}})
		}
	}
	return out
}

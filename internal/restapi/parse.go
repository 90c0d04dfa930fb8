package restapi

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
)

// This file reads the API's request objects (snake_case: docs/api.md, "Records and error forms")
// into the use cases' typed inputs. Every problem of one request is collected (web.Fields)
// and answered at once, in the 422 form.

type fields = web.Fields

var at = web.At

// validationID reads an API id: a UUID, in its canonical lower-case form.
func validationID(raw string) (string, error) { return validation.ParseUUID(raw) }

// pathID reads the path's {name}, a UUID: a malformed one is a 422 naming the path.
func pathID(raw, name string) (string, error) {
	id, err := validation.ParseUUID(raw)
	if err != nil {
		f := &fields{}
		f.AddValidation(err, []any{"path", name})
		return "", f.Err()
	}
	return id, nil
}

// parseSite reads a site object. Field problems are collected in f; the email is checked by
// the use case (onboard answers a bad email with 400, not 422).
func parseSite(f *fields, obj map[string]any, loc []any, now time.Time) app.SiteInput {
	var in app.SiteInput
	if mpan, ok := f.Str(obj, loc, "mpan", true); ok {
		if norm, err := validation.NormaliseMPAN(mpan); err != nil {
			f.AddValidation(err, at(loc, "mpan"))
		} else {
			in.MPAN = norm
		}
	}
	if pc, ok := f.Str(obj, loc, "postcode", true); ok {
		if norm, err := validation.NormalisePostcode(pc); err != nil {
			f.AddValidation(err, at(loc, "postcode"))
		} else {
			in.Postcode = &norm
		}
	}
	if addr, ok := f.Str(obj, loc, "street_address", false); ok {
		in.StreetAddress = &addr
	}
	if email, ok := f.Str(obj, loc, "email", false); ok {
		email = strings.TrimSpace(email)
		in.Email = &email
	}
	if user, ok := f.Str(obj, loc, "external_user_id", false); ok {
		in.ExternalUserID = user
	}
	in.Consent = consent(f, obj, loc, false, now)
	return in
}

// consent reads gave_boundary_meter_consent_at, a timezone-aware ISO 8601 timestamp, not in
// the future (validation.ParseConsentTime).
func consent(f *fields, obj map[string]any, loc []any, required bool, now time.Time) *time.Time {
	const key = "gave_boundary_meter_consent_at"
	s, ok := f.Str(obj, loc, key, required)
	if !ok {
		return nil
	}
	t, err := validation.ParseConsentTime(s, now)
	if err != nil {
		f.AddValidation(err, at(loc, key))
		return nil
	}
	return &t
}

func parseAsset(f *fields, obj map[string]any, loc []any, now time.Time) app.AssetInput {
	var in app.AssetInput
	in.ExternalID, _ = f.Str(obj, loc, "external_id", true)
	in.Type, _ = web.Enum(f, obj, loc, "type", true, flexv1.CreatableAssetTypes)
	in.AssetFields = parseAssetFields(f, obj, loc, now)
	if sn, ok := f.Str(obj, loc, "serial_number", false); ok {
		in.SerialNumber = &sn
	}
	return in
}

// parseAssetFields reads the asset fields a request may fill in after the asset exists (the
// AssetUpdateRequest of PATCH /entities/asset/{asset_id}): properties, asset_model and
// installation_date, each optional.
func parseAssetFields(f *fields, obj map[string]any, loc []any, now time.Time) household.AssetFields {
	var in household.AssetFields
	if props, ok := f.Object(obj, loc, "properties", false); ok {
		ploc := at(loc, "properties")
		in.PowerKW = f.NonNegative(props, ploc, "power_kw")
		in.CapacityKWh = f.NonNegative(props, ploc, "capacity_kwh")
	}
	if m, ok := f.Str(obj, loc, "asset_model", false); ok && m != "" {
		in.Model = &m
	}
	if d, ok := f.Str(obj, loc, "installation_date", false); ok {
		if err := validation.ValidateInstallationDate(d, now); err != nil {
			f.AddValidation(err, at(loc, "installation_date"))
		} else {
			in.InstallationDate = &d
		}
	}
	return in
}

// parseUpsert reads the site and assets of onboard and initialise.
func parseUpsert(f *fields, body map[string]any, now time.Time) app.UpsertInput {
	var req app.UpsertInput
	if site, ok := f.Object(body, []any{"body"}, "site", true); ok {
		req.Site = parseSite(f, site, []any{"body", "site"}, now)
	}
	if items, ok := f.Array(body, []any{"body"}, "assets", true); ok {
		switch {
		case len(items) == 0:
			f.Add("List should have at least 1 item after validation, not 0", "too_short", []any{"body", "assets"})
		case len(items) > app.MaxAssetsPerCall:
			f.Add(fmt.Sprintf("List should have at most %d items after validation, not %d", app.MaxAssetsPerCall, len(items)),
				"too_long", []any{"body", "assets"})
		}
		for i, item := range items {
			loc := []any{"body", "assets", i}
			obj, ok := item.(map[string]any)
			if !ok {
				f.Add("Input should be a valid dictionary or object to extract fields from", "model_attributes_type", loc)
				continue
			}
			req.Assets = append(req.Assets, parseAsset(f, obj, loc, now))
		}
		duplicateExternalIDs(f, req.Assets)
	}
	return req
}

// duplicateExternalIDs reports assets of one request that share an external id.
func duplicateExternalIDs(f *fields, assets []app.AssetInput) {
	seen := map[string]int{}
	for i, a := range assets {
		if a.ExternalID == "" {
			continue
		}
		if first, ok := seen[a.ExternalID]; ok {
			f.Add(fmt.Sprintf("Duplicate external_id %q (also assets[%d])", a.ExternalID, first), "value_error",
				[]any{"body", "assets", i, "external_id"})
			continue
		}
		seen[a.ExternalID] = i
	}
}

var allTariffTypes = []flexv1.TariffType{"single_rate", "dual_rate", "dynamic", "smart", "unknown"}

// tariffTime is the CRD's pattern for a cheap-rate boundary (HH:MM or HH:MM:SS).
var tariffTime = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?$`)

// parseSiteUpdate reads a PATCH /entities/site/{site_id} body: what is sent changes, nothing
// else.
func parseSiteUpdate(f *fields, body map[string]any) app.SiteUpdate {
	var in app.SiteUpdate
	loc := []any{"body"}
	if mpan, ok := f.Str(body, loc, "mpan", false); ok && mpan != "" {
		if norm, err := validation.NormaliseMPAN(mpan); err != nil {
			f.AddValidation(err, at(loc, "mpan"))
		} else {
			in.MPAN = norm
		}
	}
	if pc, ok := f.Str(body, loc, "postcode", false); ok && pc != "" {
		if norm, err := validation.NormalisePostcode(pc); err != nil {
			f.AddValidation(err, at(loc, "postcode"))
		} else {
			in.Fields.Postcode = &norm
		}
	}
	if addr, ok := f.Str(body, loc, "address", false); ok {
		in.Fields.StreetAddress = &addr
	}
	if email, ok := f.Str(body, loc, "email", false); ok && strings.TrimSpace(email) != "" {
		email = strings.TrimSpace(email)
		if err := validation.ValidateEmail(email); err != nil {
			f.Add("value is not a valid email address: "+err.Error(), "value_error", at(loc, "email"))
		} else {
			in.Fields.Email = &email
		}
	}
	if t, ok := f.Object(body, loc, "tariff", false); ok {
		tloc := at(loc, "tariff")
		tariff := &flexv1.Tariff{}
		tariff.Type, _ = web.Enum(f, t, tloc, "tariff_type", true, allTariffTypes)
		// In the body's documented order, so that a 422 names its problems in a stable order.
		for _, field := range []struct {
			key string
			dst *string
		}{{"tariff_cheap_start_time", &tariff.CheapStartTime}, {"tariff_cheap_end_time", &tariff.CheapEndTime}} {
			if v, ok := f.Str(t, tloc, field.key, false); ok && v != "" {
				if !tariffTime.MatchString(v) {
					f.Add("Input should be a valid time in the format HH:MM[:SS]", "time_parsing", at(tloc, field.key))
				}
				*field.dst = v
			}
		}
		if (tariff.CheapStartTime == "") != (tariff.CheapEndTime == "") {
			f.Add("tariff_cheap_start_time and tariff_cheap_end_time go together", "value_error", tloc)
		}
		in.Fields.Tariff = tariff
	}
	return in
}

var allDispatchMethods = []flexv1.DispatchMethod{
	"cm_infrequent_dispatch", "full_asset_schedule_control", "limited_pause", "vpp_limited_control"}

// dispatchMethods reads the required dispatch_methods of SiteDispatchConsentRequest: a list of
// distinct dispatch methods (uniqueItems), possibly empty.
func dispatchMethods(f *fields, body map[string]any, loc []any) []flexv1.DispatchMethod {
	items, ok := f.Array(body, loc, "dispatch_methods", true)
	if !ok {
		return nil
	}
	loc = at(loc, "dispatch_methods")
	methods := make([]flexv1.DispatchMethod, 0, len(items))
	first := map[flexv1.DispatchMethod]int{}
	for i, item := range items {
		m, ok := web.EnumValue(f, item, at(loc, i), allDispatchMethods)
		if !ok {
			continue
		}
		if j, seen := first[m]; seen {
			f.Add(fmt.Sprintf("List should have unique items: %q is also dispatch_methods[%d]", m, j), "value_error", at(loc, i))
			continue
		}
		first[m] = i
		methods = append(methods, m)
	}
	return methods
}

// The paged entity lists (GET /entities/site, GET /entities/asset) take the same limit and
// offset, with the same bounds, and answer the same page numbers.
const (
	defaultPageLimit = 10
	maxPageLimit     = 5000
)

// paging reads a paged list's limit (1..5000, default 10) and offset (>= 0, default 0).
func paging(f *fields, q url.Values) app.Paging {
	return app.Paging{Limit: f.QueryInt(q, "limit", defaultPageLimit, 1, maxPageLimit), Offset: f.QueryInt(q, "offset", 0, 0, -1)}
}

// queryBool reads an optional boolean query parameter (nil when absent).
func queryBool(f *fields, q url.Values, key string) *bool {
	raw, ok := q[key]
	if !ok || len(raw) == 0 || raw[0] == "" {
		return nil
	}
	switch strings.ToLower(raw[0]) {
	case "true", "1", "yes", "on":
		v := true
		return &v
	case "false", "0", "no", "off":
		v := false
		return &v
	}
	f.Add("Input should be a valid boolean, unable to interpret input", "bool_parsing", []any{"query", key})
	return nil
}

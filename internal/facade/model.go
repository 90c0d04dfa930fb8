package facade

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/record"
	"github.com/flexsite/flexsite/internal/validation"
)

// This file holds the API's shapes (snake_case, exactly as interface.md names them), the
// parsing of request objects into them, and their mapping from and onto the resources.

// siteInput is a request's site object, validated: its meter point and the fields it fills in.
type siteInput struct {
	MPAN string
	// ExternalUserID names the end user of a component token whose household this is: an
	// upsert fills that household's site (created on demand, without an MPAN) in.
	ExternalUserID string
	household.SiteFields
}

// parseSite reads a site object. Field problems are collected in f; the email is checked
// separately (checkEmail) because onboard answers a bad email with 400, not 422.
func parseSite(f *fields, obj map[string]any, loc []any) siteInput {
	var in siteInput
	if mpan, ok := f.str(obj, loc, "mpan", true); ok {
		if norm, err := validation.NormaliseMPAN(mpan); err != nil {
			f.addValidation(err, at(loc, "mpan"))
		} else {
			in.MPAN = norm
		}
	}
	if pc, ok := f.str(obj, loc, "postcode", true); ok {
		if norm, err := validation.NormalisePostcode(pc); err != nil {
			f.addValidation(err, at(loc, "postcode"))
		} else {
			in.Postcode = &norm
		}
	}
	if addr, ok := f.str(obj, loc, "street_address", false); ok {
		in.StreetAddress = &addr
	}
	if email, ok := f.str(obj, loc, "email", false); ok {
		email = strings.TrimSpace(email)
		in.Email = &email
	}
	if user, ok := f.str(obj, loc, "external_user_id", false); ok {
		in.ExternalUserID = user
	}
	in.Consent = f.consent(obj, loc, false)
	return in
}

// checkEmail answers an invalid site email with 400, as the production service does.
func (in siteInput) checkEmail() error {
	if in.Email == nil || *in.Email == "" {
		return nil
	}
	if err := validation.ValidateEmail(*in.Email); err != nil {
		return fail(http.StatusBadRequest, "Invalid email address: %s", err.Error())
	}
	return nil
}

// addValidation records a validation package error at loc.
func (f *fields) addValidation(err error, loc []any) {
	var ve *validation.Error
	if errors.As(err, &ve) {
		f.add(ve.Msg, ve.Type, loc)
		return
	}
	f.add(err.Error(), "value_error", loc)
}

// consent reads gave_boundary_meter_consent_at, a timezone-aware ISO 8601 timestamp.
func (f *fields) consent(obj map[string]any, loc []any, required bool) *time.Time {
	const key = "gave_boundary_meter_consent_at"
	s, ok := f.str(obj, loc, key, required)
	if !ok {
		return nil
	}
	t, err := validation.ParseAwareTimestamp(s)
	if err != nil {
		f.addValidation(err, at(loc, key))
		return nil
	}
	return &t
}

// assetInput is a request's asset object, validated: its key, its type and the fields it
// fills in.
type assetInput struct {
	ExternalID string
	Type       flexv1.AssetType
	household.AssetFields
}

func parseAsset(f *fields, obj map[string]any, loc []any, now time.Time) assetInput {
	var in assetInput
	in.ExternalID, _ = f.str(obj, loc, "external_id", true)
	in.Type, _ = enum(f, obj, loc, "type", true, flexv1.CreatableAssetTypes)
	in.AssetFields = parseAssetFields(f, obj, loc, now)
	if sn, ok := f.str(obj, loc, "serial_number", false); ok {
		in.SerialNumber = &sn
	}
	return in
}

// parseAssetFields reads the asset fields a request may fill in after the asset exists (the
// AssetUpdateRequest of PATCH /entities/asset/{asset_id}): properties, asset_model and
// installation_date, each optional.
func parseAssetFields(f *fields, obj map[string]any, loc []any, now time.Time) household.AssetFields {
	var in household.AssetFields
	if props, ok := f.object(obj, loc, "properties", false); ok {
		ploc := at(loc, "properties")
		in.PowerKW = f.nonNegative(props, ploc, "power_kw")
		in.CapacityKWh = f.nonNegative(props, ploc, "capacity_kwh")
	}
	if m, ok := f.str(obj, loc, "asset_model", false); ok && m != "" {
		in.Model = &m
	}
	if d, ok := f.str(obj, loc, "installation_date", false); ok {
		if err := validation.ValidateInstallationDate(d, now); err != nil {
			f.addValidation(err, at(loc, "installation_date"))
		} else {
			in.InstallationDate = &d
		}
	}
	return in
}

// UpsertSiteResult is the `site` of onboard and initialise answers.
type UpsertSiteResult struct {
	SiteID        string   `json:"site_id"`
	SiteCreated   bool     `json:"site_created"`
	FieldsUpdated []string `json:"fields_updated"`
	Warnings      []string `json:"warnings"`
}

// UpsertAssetResult is one item of `assets` in onboard and initialise answers.
type UpsertAssetResult struct {
	AssetID       string   `json:"asset_id"`
	ExternalID    string   `json:"external_id"`
	AssetCreated  bool     `json:"asset_created"`
	FieldsUpdated []string `json:"fields_updated"`
	Warnings      []string `json:"warnings"`
}

// EnrolResult answers enrol (and is onboard's `enrolment`).
type EnrolResult struct {
	SiteID string `json:"site_id"`
	Status string `json:"status"`
}

// The eligibility and asset records are internal/record's (notifications carry them too).
type (
	// EligibilityRecord is the eligibility of a site, as the API reports it.
	EligibilityRecord = record.Eligibility
	// SitePropertiesRecord is the eligibility record's `site_properties`.
	SitePropertiesRecord = record.SiteProperties
	// AssetEligibilityRecord is one item of the eligibility record's `assets`.
	AssetEligibilityRecord = record.AssetEligibility
	// PropositionEligibilityRecord is an asset's eligibility for one proposition.
	PropositionEligibilityRecord = record.PropositionEligibility
	// AssetProperties is an asset record's `properties`.
	AssetProperties = record.AssetProperties
	// AssetRecord is the asset record of interface.md.
	AssetRecord = record.Asset
)

func eligibilityRecord(siteID string, res eligibility.Result) *EligibilityRecord {
	return record.EligibilityOf(siteID, res)
}

func assetRecord(a *flexv1.Asset, siteID string) AssetRecord { return record.AssetOf(a, siteID) }

// TariffRecord is the legacy site record's `tariff`.
type TariffRecord struct {
	TariffType     flexv1.TariffType `json:"tariff_type,omitempty"`
	CheapStartTime string            `json:"tariff_cheap_start_time,omitempty"`
	CheapEndTime   string            `json:"tariff_cheap_end_time,omitempty"`
}

// LegacySiteRecord is the legacy site record of interface.md.
type LegacySiteRecord struct {
	ID                     string                  `json:"id"`
	MPAN                   string                  `json:"mpan"`
	Postcode               string                  `json:"postcode"`
	Address                string                  `json:"address"`
	AssetIDs               []string                `json:"asset_ids"`
	Markets                []flexv1.Market         `json:"markets"`
	DispatchMethods        []flexv1.DispatchMethod `json:"dispatch_methods"`
	Tariff                 *TariffRecord           `json:"tariff,omitempty"`
	BoundaryMeterConsentAt *string                 `json:"gave_boundary_meter_consent_at"`
}

// legacySiteRecord maps a Site (and its assets) onto the legacy record. withTariffType: the
// production service reports tariff_type only in the offboard answer.
func legacySiteRecord(s *flexv1.Site, assets []flexv1.Asset, withTariffType bool) LegacySiteRecord {
	rec := LegacySiteRecord{
		ID: s.Labels[flexv1.IDLabel], MPAN: s.Spec.MPAN, Postcode: s.Spec.Postcode, Address: s.Spec.StreetAddress,
		AssetIDs:               make([]string, 0, len(assets)),
		Markets:                nonNil(s.Spec.Markets),
		DispatchMethods:        nonNil(s.Spec.DispatchMethods),
		BoundaryMeterConsentAt: formatTime(s.Spec.BoundaryMeterConsentAt),
	}
	byName := slices.Clone(assets) // the caller's slice keeps its order
	slices.SortFunc(byName, func(a, b flexv1.Asset) int { return strings.Compare(a.Name, b.Name) })
	for i := range byName {
		rec.AssetIDs = append(rec.AssetIDs, byName[i].Labels[flexv1.IDLabel])
	}
	if t := s.Spec.Tariff; t != nil {
		rec.Tariff = &TariffRecord{CheapStartTime: t.CheapStartTime, CheapEndTime: t.CheapEndTime}
		if withTariffType {
			rec.Tariff.TariffType = t.Type
		}
	}
	return rec
}

func formatTime(t *metav1.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

// nonNil turns a nil slice into an empty one so JSON says [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

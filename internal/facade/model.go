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
	"github.com/flexsite/flexsite/internal/units"
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

// EligibilityRecord is the eligibility of a site, as the API reports it.
type EligibilityRecord struct {
	SiteID               string                   `json:"site_id"`
	SiteProperties       SitePropertiesRecord     `json:"site_properties"`
	EligiblePropositions []flexv1.PropositionName `json:"eligible_propositions"`
	Assets               []AssetEligibilityRecord `json:"assets"`
	// SiteIssues are Flexsite's addition: what keeps the site itself from every proposition
	// (site_details_missing: a household created for a component token has no MPAN yet).
	// Left out when there are none, so that the documented record is unchanged.
	SiteIssues []flexv1.EligibilityIssue `json:"site_issues,omitempty"`
}

// SitePropertiesRecord is the eligibility record's `site_properties`.
type SitePropertiesRecord struct {
	HasMeterConsent     bool `json:"has_meter_consent"`
	IsHalfHourlySettled bool `json:"is_half_hourly_settled"`
}

// AssetEligibilityRecord is one item of the eligibility record's `assets`.
type AssetEligibilityRecord struct {
	AssetID      string                         `json:"asset_id"`
	ExternalID   string                         `json:"external_id"`
	Propositions []PropositionEligibilityRecord `json:"propositions"`
}

// PropositionEligibilityRecord is an asset's eligibility for one proposition.
type PropositionEligibilityRecord struct {
	Proposition flexv1.PropositionName    `json:"proposition"`
	IsEligible  bool                      `json:"is_eligible"`
	Issues      []flexv1.EligibilityIssue `json:"issues"`
}

func eligibilityRecord(siteID string, res eligibility.Result) *EligibilityRecord {
	rec := &EligibilityRecord{
		SiteID: siteID,
		SiteProperties: SitePropertiesRecord{
			HasMeterConsent: res.Properties.HasMeterConsent, IsHalfHourlySettled: res.Properties.IsHalfHourlySettled},
		EligiblePropositions: nonNil(res.EligiblePropositions),
		Assets:               make([]AssetEligibilityRecord, 0, len(res.Assets)),
		SiteIssues:           res.SiteIssues,
	}
	for _, a := range res.Assets {
		ar := AssetEligibilityRecord{AssetID: a.ID, ExternalID: a.ExternalID,
			Propositions: make([]PropositionEligibilityRecord, 0, len(a.Propositions))}
		for _, p := range a.Propositions {
			ar.Propositions = append(ar.Propositions, PropositionEligibilityRecord{
				Proposition: p.Proposition, IsEligible: p.Eligible, Issues: nonNil(p.Issues)})
		}
		rec.Assets = append(rec.Assets, ar)
	}
	return rec
}

// AssetProperties is an asset record's `properties`.
type AssetProperties struct {
	PowerKW               *float64 `json:"power_kw,omitempty"`
	CapacityKWh           *float64 `json:"capacity_kwh,omitempty"`
	CustomDispatchPowerKW *float64 `json:"custom_dispatch_power_kw,omitempty"`
}

// AssetRecord is the asset record of interface.md.
type AssetRecord struct {
	ID                   string           `json:"id"`
	ExternalID           string           `json:"external_id"`
	Type                 flexv1.AssetType `json:"type"`
	SiteID               string           `json:"site_id"`
	Properties           AssetProperties  `json:"properties"`
	NeedsReauthorisation bool             `json:"needs_reauthorisation"`
}

func assetRecord(a *flexv1.Asset, siteID string) AssetRecord {
	return AssetRecord{
		ID: a.Labels[flexv1.IDLabel], ExternalID: a.Spec.ExternalID, Type: a.Spec.Type, SiteID: siteID,
		Properties: AssetProperties{PowerKW: units.ToKilo(a.Spec.PowerW), CapacityKWh: units.ToKilo(a.Spec.CapacityWh),
			CustomDispatchPowerKW: units.ToKilo(a.Spec.CustomDispatchPowerW)},
		NeedsReauthorisation: a.Status.NeedsReauthorisation,
	}
}

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

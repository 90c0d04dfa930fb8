package app

import (
	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/record"
)

// This file holds the use cases' inputs and results: the API's shapes (snake_case, as
// docs/api.md, "Records and error forms" names them), and their mapping from the resources.

// SiteInput is a request's site object, validated: its meter point and the fields it fills in.
type SiteInput struct {
	MPAN string
	// ExternalUserID names the end user of a component token whose household this is: an
	// upsert fills that household's site (created on demand, without an MPAN) in.
	ExternalUserID string
	household.SiteFields
}

// AssetInput is a request's asset object, validated: its key, its type and the fields it
// fills in.
type AssetInput struct {
	ExternalID string
	Type       flexv1.AssetType
	household.AssetFields
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
	// AssetRecord is the asset record (docs/api.md, "Records and error forms").
	AssetRecord = record.Asset
)

func eligibilityRecord(siteID string, res eligibility.Result) *EligibilityRecord {
	return record.EligibilityOf(siteID, res)
}

func assetRecord(a *flexv1.Asset, siteID string) AssetRecord { return record.AssetOf(a, siteID) }

// The legacy site record is internal/record's, shown to each caller as it may see it.
type (
	// TariffRecord is the legacy site record's `tariff`.
	TariffRecord = record.Tariff
	// LegacySiteRecord is the site record (docs/api.md, "Records and error forms").
	LegacySiteRecord = record.LegacySite
)

// legacySiteRecord is the legacy record of a Site (and its assets) as p may see it (its MPAN:
// auth.Principal.MPANViewer). withTariffType: prod reports tariff_type only when offboarding.
func legacySiteRecord(p *auth.Principal, s *flexv1.Site, assets []flexv1.Asset, withTariffType bool) LegacySiteRecord {
	return record.LegacySiteOf(s, assets, withTariffType, p.MPANViewer())
}

// FormatTime writes a time as the API does (RFC 3339, UTC); nil stays nil.
var FormatTime = record.FormatTime

// nonNil turns a nil slice into an empty one so JSON says [] rather than null.
func nonNil[T any](s []T) []T { return record.NonNil(s) }

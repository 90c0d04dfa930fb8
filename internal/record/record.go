// Package record holds the API's records that more than one door answers with: the REST
// REST API in its responses, notifications in their event data. Pure: no Kubernetes client.
package record

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/units"
)

// Eligibility is the eligibility of a site, as the API reports it.
type Eligibility struct {
	SiteID               string                   `json:"site_id"`
	SiteProperties       SiteProperties           `json:"site_properties"`
	EligiblePropositions []flexv1.PropositionName `json:"eligible_propositions"`
	Assets               []AssetEligibility       `json:"assets"`
	// SiteIssues are Flexsite's addition: what keeps the site itself from every proposition
	// (site_details_missing: a household created for a component token has no MPAN yet).
	// Left out when there are none, so that the documented record is unchanged.
	SiteIssues []flexv1.EligibilityIssue `json:"site_issues,omitempty"`
}

// SiteProperties is the eligibility record's `site_properties`.
type SiteProperties struct {
	HasMeterConsent     bool `json:"has_meter_consent"`
	IsHalfHourlySettled bool `json:"is_half_hourly_settled"`
}

// AssetEligibility is one item of the eligibility record's `assets`.
type AssetEligibility struct {
	AssetID      string                   `json:"asset_id"`
	ExternalID   string                   `json:"external_id"`
	Propositions []PropositionEligibility `json:"propositions"`
}

// PropositionEligibility is an asset's eligibility for one proposition.
type PropositionEligibility struct {
	Proposition flexv1.PropositionName    `json:"proposition"`
	IsEligible  bool                      `json:"is_eligible"`
	Issues      []flexv1.EligibilityIssue `json:"issues"`
}

// EligibilityOf is the eligibility record of an evaluation.
func EligibilityOf(siteID string, res eligibility.Result) *Eligibility {
	rec := &Eligibility{
		SiteID: siteID,
		SiteProperties: SiteProperties{
			HasMeterConsent: res.Properties.HasMeterConsent, IsHalfHourlySettled: res.Properties.IsHalfHourlySettled},
		EligiblePropositions: NonNil(res.EligiblePropositions),
		Assets:               make([]AssetEligibility, 0, len(res.Assets)),
		SiteIssues:           res.SiteIssues,
	}
	for _, a := range res.Assets {
		ar := AssetEligibility{AssetID: a.ID, ExternalID: a.ExternalID,
			Propositions: make([]PropositionEligibility, 0, len(a.Propositions))}
		for _, p := range a.Propositions {
			ar.Propositions = append(ar.Propositions, PropositionEligibility{
				Proposition: p.Proposition, IsEligible: p.Eligible, Issues: NonNil(p.Issues)})
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

// Asset is the asset record (docs/api.md, "Records and error forms").
type Asset struct {
	ID                   string           `json:"id"`
	ExternalID           string           `json:"external_id"`
	Type                 flexv1.AssetType `json:"type"`
	SiteID               string           `json:"site_id"`
	Properties           AssetProperties  `json:"properties"`
	NeedsReauthorisation bool             `json:"needs_reauthorisation"`
}

// AssetOf is the asset record of an Asset of the site with API id siteID.
func AssetOf(a *flexv1.Asset, siteID string) Asset {
	return Asset{
		ID: a.Labels[flexv1.IDLabel], ExternalID: a.Spec.ExternalID, Type: a.Spec.Type, SiteID: siteID,
		Properties: AssetProperties{PowerKW: units.ToKilo(a.Spec.PowerW), CapacityKWh: units.ToKilo(a.Spec.CapacityWh),
			CustomDispatchPowerKW: units.ToKilo(a.Spec.CustomDispatchPowerW)},
		NeedsReauthorisation: a.Status.NeedsReauthorisation,
	}
}

// Transaction is a reward transaction record (`transactions` of GET /rewards/{site_id}/transactions).
type Transaction struct {
	TransactionID   string                 `json:"transaction_id"`
	CreditPence     int64                  `json:"credit_pence"`
	TransactionType flexv1.TransactionType `json:"transaction_type,omitempty"`
	StartTime       *string                `json:"start_time,omitempty"`
	EndTime         *string                `json:"end_time,omitempty"`
	SettlementDate  string                 `json:"settlement_date,omitempty"`
	FlexKWh         *float64               `json:"flex_kwh,omitempty"`
	PaymentStatus   flexv1.PaymentStatus   `json:"payment_status,omitempty"`
}

// TransactionOf is the record of one transaction.
func TransactionOf(tx *flexv1.RewardTransaction) Transaction {
	return Transaction{TransactionID: tx.ID, CreditPence: tx.CreditPence, TransactionType: tx.Type,
		StartTime: FormatTime(tx.StartTime), EndTime: FormatTime(tx.EndTime), SettlementDate: tx.SettlementDate,
		FlexKWh: units.ToKilo(tx.FlexWh), PaymentStatus: tx.PaymentStatus}
}

// FormatTime writes a time as the API does (RFC 3339, UTC); nil stays nil.
func FormatTime(t *metav1.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

// NonNil turns a nil slice into an empty one so JSON says [] rather than null.
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

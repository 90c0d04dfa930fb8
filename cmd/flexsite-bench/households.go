package main

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/validation"
)

// The household every scenario onboards: the README's example, a site with boundary meter
// consent, a CoP11-qualified charger (which makes it eligible) and a battery of no model.
const (
	postcode         = "SW1A 1AA"
	streetAddress    = "1 Bench Street"
	email            = "resident@example.com"
	consentAt        = "2026-01-15T10:30:00Z"
	installationDate = "2025-06-15"
	chargerModel     = "zappi"
)

// households hands out fresh, valid MPANs in one namespace.
type households struct {
	ns     string
	prefix int
	next   atomic.Int64
}

func newHouseholds(ns string, prefix int) *households { return &households{ns: ns, prefix: prefix} }

// mpan returns a new MPAN: two digits of prefix, a counter, and the check digit.
func (h *households) mpan() string {
	first12 := fmt.Sprintf("%02d%010d", h.prefix, h.next.Add(1))
	return fmt.Sprintf("%s%d", first12, validation.MPANCheckDigit(first12))
}

func chargerID(mpan string) string { return "charger-" + mpan }
func batteryID(mpan string) string { return "battery-" + mpan }

// onboardBody is the REST onboard request of one household, enrolled in limited_pause.
func onboardBody(mpan string) map[string]any {
	return map[string]any{
		"site": map[string]any{"mpan": mpan, "postcode": postcode, "street_address": streetAddress,
			"email": email, "gave_boundary_meter_consent_at": consentAt},
		"assets": []any{
			map[string]any{"external_id": chargerID(mpan), "type": "charger", "asset_model": chargerModel,
				"installation_date": installationDate, "properties": map[string]any{"power_kw": 7.4}},
			map[string]any{"external_id": batteryID(mpan), "type": "battery",
				"properties": map[string]any{"power_kw": 5, "capacity_kwh": 13.5}},
		},
		"proposition": string(flexv1.PropositionLimitedPause),
	}
}

// onboardResponse is the part of the answer the bench uses.
type onboardResponse struct {
	Site struct {
		SiteID string `json:"site_id"`
	} `json:"site"`
	Enrolment struct {
		Status string `json:"status"`
	} `json:"enrolment"`
}

// newSite is a Site as the REST API creates it: id label and finalizer set at creation, so no
// controller needs to write them afterwards.
func newSite(ns, mpan string, spec flexv1.SiteSpec) *flexv1.Site {
	spec.MPAN = mpan
	return &flexv1.Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.SiteNameForMPAN(mpan),
			Labels: map[string]string{flexv1.IDLabel: identity.NewID()}, Finalizers: []string{flexv1.Finalizer}},
		Spec: spec,
	}
}

// markInFlight gives a site the in-flight marker the REST API sets on a site its request
// creates, naming what the request writes after it.
func markInFlight(site *flexv1.Site, mpan string) {
	household.InFlight{Until: time.Now().Add(server.DefaultInFlightTimeout),
		Assets:     []string{identity.AssetName(chargerID(mpan)), identity.AssetName(batteryID(mpan))},
		Enrolments: []flexv1.PropositionName{flexv1.PropositionLimitedPause}}.Mark(site)
}

// householdSpec is the onboard body's site as stored.
func householdSpec() flexv1.SiteSpec {
	consent, err := time.Parse(time.RFC3339, consentAt)
	if err != nil {
		panic(err)
	}
	return flexv1.SiteSpec{Postcode: postcode, StreetAddress: streetAddress, Email: email,
		BoundaryMeterConsentAt: &metav1.Time{Time: consent}}
}

// newAsset is an Asset as the REST API creates it, with its id label.
func newAsset(ns, siteName, externalID string, spec flexv1.AssetSpec) *flexv1.Asset {
	spec.SiteName, spec.ExternalID = siteName, externalID
	return &flexv1.Asset{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.AssetName(externalID),
			Labels: map[string]string{flexv1.IDLabel: identity.NewID()}},
		Spec: spec,
	}
}

func chargerSpec() flexv1.AssetSpec {
	return flexv1.AssetSpec{Type: flexv1.AssetTypeCharger, Model: chargerModel, InstallationDate: installationDate,
		PowerW: ptr.To[int64](7400)}
}

func batterySpec() flexv1.AssetSpec {
	return flexv1.AssetSpec{Type: flexv1.AssetTypeBattery, PowerW: ptr.To[int64](5000), CapacityWh: ptr.To[int64](13500)}
}

// newEnrolment is an Enrolment in limited_pause as the REST API creates it, with its finalizer.
func newEnrolment(ns, siteName string) *flexv1.Enrolment {
	return newEnrolmentIn(ns, siteName, flexv1.PropositionLimitedPause)
}

// newEnrolmentIn is an Enrolment in prop as the REST API creates it, with its finalizer.
func newEnrolmentIn(ns, siteName string, prop flexv1.PropositionName) *flexv1.Enrolment {
	return &flexv1.Enrolment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.EnrolmentName(siteName, prop),
			Finalizers: []string{flexv1.Finalizer}},
		Spec: flexv1.EnrolmentSpec{SiteName: siteName, Proposition: prop},
	}
}

// newLedger is a year of weekly "flex period" rewards for a site, as a rewards system would
// write it: one RewardLedger per site, transactions keyed by uuid.
func newLedger(ns, siteName string, weeks int) *flexv1.RewardLedger {
	start := time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC)
	txs := make([]flexv1.RewardTransaction, weeks)
	for i := range txs {
		from := start.AddDate(0, 0, 7*i)
		to := from.AddDate(0, 0, 7)
		txs[i] = flexv1.RewardTransaction{
			ID:             uuid.NewString(),
			Type:           "flex period",
			CreditPence:    int64(20 + (i*37)%180),
			StartTime:      &metav1.Time{Time: from},
			EndTime:        &metav1.Time{Time: to},
			SettlementDate: to.AddDate(0, 0, 5).Format(time.DateOnly),
			FlexWh:         ptr.To(int64(1500 + 10*i)),
		}
	}
	return &flexv1.RewardLedger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.RewardLedgerName(siteName)},
		Spec:       flexv1.RewardLedgerSpec{SiteName: siteName, Transactions: txs},
	}
}

func objectMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name}
}

// mergePatch is a JSON merge patch built from a format string.
func mergePatch(format string, args ...any) client.Patch {
	return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, format, args...))
}

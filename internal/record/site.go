package record

import (
	"slices"
	"strings"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/meters"
)

// Tariff is the legacy site record's `tariff`.
type Tariff struct {
	TariffType     flexv1.TariffType `json:"tariff_type,omitempty"`
	CheapStartTime string            `json:"tariff_cheap_start_time,omitempty"`
	CheapEndTime   string            `json:"tariff_cheap_end_time,omitempty"`
}

// LegacySite is the site record (docs/api.md, "Records and error forms").
type LegacySite struct {
	ID string `json:"id"`
	// MPAN is the site's MPAN as the caller may see it (meters.MPANFor): in full for the
	// organisation's API clients, masked but for its last four digits for a household.
	MPAN            string                  `json:"mpan"`
	Postcode        string                  `json:"postcode"`
	Address         string                  `json:"address"`
	AssetIDs        []string                `json:"asset_ids"`
	Markets         []flexv1.Market         `json:"markets"`
	DispatchMethods []flexv1.DispatchMethod `json:"dispatch_methods"`
	Tariff          *Tariff                 `json:"tariff,omitempty"`
	// BoundaryMeterConsentAt is absent, never null, when no consent was given: production's
	// SiteResponse declares it a string, and a strict client refuses a null.
	BoundaryMeterConsentAt *string `json:"gave_boundary_meter_consent_at,omitempty"`
}

// LegacySiteOf maps a Site (and its assets) onto the legacy record, as viewer may see it (its
// MPAN: meters.MPANFor). withTariffType: the production service reports tariff_type only in
// the offboard answer.
func LegacySiteOf(s *flexv1.Site, assets []flexv1.Asset, withTariffType bool, viewer meters.Viewer) LegacySite {
	rec := LegacySite{
		ID: s.Labels[flexv1.IDLabel], MPAN: meters.MPANFor(viewer, s.Spec.MPAN), Postcode: s.Spec.Postcode,
		Address:                s.Spec.StreetAddress,
		AssetIDs:               make([]string, 0, len(assets)),
		Markets:                NonNil(s.Spec.Markets),
		DispatchMethods:        NonNil(s.Spec.DispatchMethods),
		BoundaryMeterConsentAt: FormatTime(s.Spec.BoundaryMeterConsentAt),
	}
	byName := slices.Clone(assets) // the caller's slice keeps its order
	slices.SortFunc(byName, func(a, b flexv1.Asset) int { return strings.Compare(a.Name, b.Name) })
	for i := range byName {
		rec.AssetIDs = append(rec.AssetIDs, byName[i].Labels[flexv1.IDLabel])
	}
	if t := s.Spec.Tariff; t != nil {
		rec.Tariff = &Tariff{CheapStartTime: withSeconds(t.CheapStartTime), CheapEndTime: withSeconds(t.CheapEndTime)}
		if withTariffType {
			rec.Tariff.TariffType = t.Type
		}
	}
	return rec
}

// withSeconds writes a tariff's time of day as HH:MM:SS, as production answers a time (a Site
// keeps it as it was given, HH:MM or HH:MM:SS).
func withSeconds(hhmm string) string {
	if len(hhmm) == len("15:04") {
		return hhmm + ":00"
	}
	return hhmm
}

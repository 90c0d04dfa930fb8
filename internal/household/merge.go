package household

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/units"
)

// A request fills in a household's stored fields; it never clears them. A field the request
// leaves out, sends as null or sends as an empty string keeps its stored value; a non-empty
// value that differs replaces it and is named (by its API name) among the fields updated.

// SiteFields are the site fields a request may fill in; nil means "not sent".
type SiteFields struct {
	Postcode      *string
	StreetAddress *string
	Email         *string
	// Consent is when the household gave boundary meter consent.
	Consent *time.Time
	// Tariff fills the stored tariff in, field by field.
	Tariff *flexv1.Tariff
}

// AssetFields are the asset fields a request may fill in; nil means "not sent". Power and
// capacity come as the request gives them, in kW and kWh; the spec stores whole W and Wh.
type AssetFields struct {
	Model            *string
	InstallationDate *string
	SerialNumber     *string
	PowerKW          *float64
	CapacityKWh      *float64
}

// MergeSite fills the site's spec in from the request and names the fields it changed.
func MergeSite(spec *flexv1.SiteSpec, in SiteFields) []string {
	var changed fieldNames
	note := changed.note
	note("postcode", fillString(&spec.Postcode, in.Postcode))
	note("street_address", fillString(&spec.StreetAddress, in.StreetAddress))
	note("email", fillString(&spec.Email, in.Email))
	if in.Consent != nil {
		// The resource keeps whole seconds (RFC 3339): compare at that precision, or a repeat
		// of the same request would "change" a consent given at 10:30:00.5.
		consent := in.Consent.UTC().Truncate(time.Second)
		if spec.BoundaryMeterConsentAt == nil || !spec.BoundaryMeterConsentAt.Time.Equal(consent) {
			spec.BoundaryMeterConsentAt = &metav1.Time{Time: consent}
			note("gave_boundary_meter_consent_at", true)
		}
	}
	if in.Tariff != nil {
		if spec.Tariff == nil {
			spec.Tariff = &flexv1.Tariff{}
		}
		t := spec.Tariff
		note("tariff.tariff_type", fillString((*string)(&t.Type), (*string)(&in.Tariff.Type)))
		note("tariff.tariff_cheap_start_time", fillString(&t.CheapStartTime, &in.Tariff.CheapStartTime))
		note("tariff.tariff_cheap_end_time", fillString(&t.CheapEndTime, &in.Tariff.CheapEndTime))
		if *t == (flexv1.Tariff{}) {
			spec.Tariff = nil
		}
	}
	return changed
}

// MergeAsset fills the asset's spec in from the request and names the fields it changed.
func MergeAsset(spec *flexv1.AssetSpec, in AssetFields) []string {
	var changed fieldNames
	note := changed.note
	note("asset_model", fillString(&spec.Model, in.Model))
	note("installation_date", fillString(&spec.InstallationDate, in.InstallationDate))
	note("serial_number", fillString(&spec.SerialNumber, in.SerialNumber))
	note("properties.power_kw", fillNumber(&spec.PowerW, units.FromKilo(in.PowerKW)))
	note("properties.capacity_kwh", fillNumber(&spec.CapacityWh, units.FromKilo(in.CapacityKWh)))
	return changed
}

// fieldNames collects the API names of the fields a merge changed.
type fieldNames []string

func (f *fieldNames) note(name string, changed bool) {
	if changed {
		*f = append(*f, name)
	}
}

// fillString stores a sent, non-empty value that differs from the stored one.
func fillString(stored *string, sent *string) bool {
	if sent == nil || *sent == "" || *stored == *sent {
		return false
	}
	*stored = *sent
	return true
}

// fillNumber stores a sent value that differs from the stored one. Power and capacity are
// compared in the stored units, so a repeat of a request that differs below a watt (7.4 and
// 7.4001 kW) changes nothing.
func fillNumber(stored **int64, sent *int64) bool {
	if sent == nil || (*stored != nil && **stored == *sent) {
		return false
	}
	v := *sent
	*stored = &v
	return true
}

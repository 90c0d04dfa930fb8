package household

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func ptrTo[T any](v T) *T { return &v }

// TestMergeSite reads docs/api.md, "Onboard and initialise: what a request changes": what is
// left out, null or empty never clears a stored value; a different non-empty value replaces
// it and is named.
func TestMergeSite(t *testing.T) {
	stored := func() flexv1.SiteSpec {
		return flexv1.SiteSpec{MPAN: "1200000000011", Postcode: "SW1A 1AA", StreetAddress: "10 Downing Street",
			Email: "a@example.com", BoundaryMeterConsentAt: at(t0)}
	}
	cases := []struct {
		name    string
		in      SiteFields
		want    func(*flexv1.SiteSpec)
		changed []string
	}{
		{name: "nothing sent", in: SiteFields{}, changed: nil},
		{name: "empty strings keep what is stored",
			in: SiteFields{Postcode: ptrTo(""), StreetAddress: ptrTo(""), Email: ptrTo("")}, changed: nil},
		{name: "the same values change nothing",
			in:      SiteFields{Postcode: ptrTo("SW1A 1AA"), StreetAddress: ptrTo("10 Downing Street"), Consent: ptrTo(t0)},
			changed: nil},
		{name: "a consent within the same second changes nothing", in: SiteFields{Consent: ptrTo(t0.Add(400 * time.Millisecond))}},
		{name: "a corrected email replaces the stored one", in: SiteFields{Email: ptrTo("b@example.com")},
			want: func(s *flexv1.SiteSpec) { s.Email = "b@example.com" }, changed: []string{"email"}},
		{name: "every field at once",
			in: SiteFields{Postcode: ptrTo("EC1A 1BB"), StreetAddress: ptrTo("1 New Street"), Email: ptrTo("c@example.com"),
				Consent: ptrTo(t0.Add(time.Hour))},
			want: func(s *flexv1.SiteSpec) {
				s.Postcode, s.StreetAddress, s.Email = "EC1A 1BB", "1 New Street", "c@example.com"
				s.BoundaryMeterConsentAt = at(t0.Add(time.Hour))
			},
			changed: []string{"postcode", "street_address", "email", "gave_boundary_meter_consent_at"}},
		{name: "a tariff fills in an absent one",
			in: SiteFields{Tariff: &flexv1.Tariff{Type: "dual_rate", CheapStartTime: "00:30", CheapEndTime: "04:30"}},
			want: func(s *flexv1.SiteSpec) {
				s.Tariff = &flexv1.Tariff{Type: "dual_rate", CheapStartTime: "00:30", CheapEndTime: "04:30"}
			},
			changed: []string{"tariff.tariff_type", "tariff.tariff_cheap_start_time", "tariff.tariff_cheap_end_time"}},
		{name: "an empty tariff leaves none", in: SiteFields{Tariff: &flexv1.Tariff{}}, changed: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, want := stored(), stored()
			if tc.want != nil {
				tc.want(&want)
			}
			changed := MergeSite(&got, tc.in)
			if !slices.Equal(changed, tc.changed) {
				t.Errorf("changed %v, want %v", changed, tc.changed)
			}
			if !got.BoundaryMeterConsentAt.Equal(want.BoundaryMeterConsentAt) {
				t.Errorf("consent %v, want %v", got.BoundaryMeterConsentAt, want.BoundaryMeterConsentAt)
			}
			got.BoundaryMeterConsentAt, want.BoundaryMeterConsentAt = nil, nil
			if !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("stored %+v, want %+v", got, want)
			}
		})
	}
	t.Run("a tariff changes field by field", func(t *testing.T) {
		spec := flexv1.SiteSpec{Tariff: &flexv1.Tariff{Type: "dual_rate", CheapStartTime: "00:30", CheapEndTime: "04:30"}}
		changed := MergeSite(&spec, SiteFields{Tariff: &flexv1.Tariff{Type: "dual_rate", CheapEndTime: "05:00"}})
		if !slices.Equal(changed, []string{"tariff.tariff_cheap_end_time"}) ||
			*spec.Tariff != (flexv1.Tariff{Type: "dual_rate", CheapStartTime: "00:30", CheapEndTime: "05:00"}) {
			t.Errorf("changed %v, tariff %+v", changed, spec.Tariff)
		}
	})
	t.Run("fills in an empty site", func(t *testing.T) {
		var spec flexv1.SiteSpec
		changed := MergeSite(&spec, SiteFields{StreetAddress: ptrTo("2 Road"), Consent: ptrTo(t0.Add(300 * time.Millisecond))})
		if !slices.Equal(changed, []string{"street_address", "gave_boundary_meter_consent_at"}) ||
			spec.StreetAddress != "2 Road" || !spec.BoundaryMeterConsentAt.Equal(&metav1.Time{Time: t0}) {
			t.Errorf("changed %v, spec %+v", changed, spec)
		}
	})
}

func TestMergeAsset(t *testing.T) {
	spec := flexv1.AssetSpec{Model: "zappi", InstallationDate: "2025-06-15", PowerW: ptrTo(int64(7400))}
	if changed := MergeAsset(&spec, AssetFields{Model: ptrTo(""), InstallationDate: ptrTo(""), PowerKW: ptrTo(7.4)}); changed != nil {
		t.Errorf("empty and equal values changed %v", changed)
	}
	if changed := MergeAsset(&spec, AssetFields{PowerKW: ptrTo(7.4001)}); changed != nil {
		t.Errorf("a difference below a watt changed %v", changed)
	}
	changed := MergeAsset(&spec, AssetFields{Model: ptrTo("eddi"), CapacityKWh: ptrTo(13.5), SerialNumber: ptrTo("SN-1")})
	if !slices.Equal(changed, []string{"asset_model", "serial_number", "properties.capacity_kwh"}) {
		t.Errorf("changed %v", changed)
	}
	if spec.Model != "eddi" || spec.InstallationDate != "2025-06-15" || *spec.PowerW != 7400 || *spec.CapacityWh != 13500 {
		t.Errorf("merged %+v", spec)
	}
}

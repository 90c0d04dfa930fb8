package household

import (
	"slices"
	"testing"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

const (
	cmID  = flexv1.DispatchMethod("cm_infrequent_dispatch")
	lpDM  = flexv1.DispatchMethod("limited_pause")
	fsDM  = flexv1.DispatchMethod("full_asset_schedule_control")
	vppDM = flexv1.DispatchMethod("vpp_limited_control")
)

// TestDispatchConsent reads docs/api.md, "The site and asset lifecycle": dispatch-consent
// adds the methods, dispatch-deconsent removes them; a call that changes nothing names no
// field (and so writes nothing).
func TestDispatchConsent(t *testing.T) {
	dm := func(m ...flexv1.DispatchMethod) []flexv1.DispatchMethod { return m }
	cases := []struct {
		name      string
		consent   bool // false: deconsent
		stored    []flexv1.DispatchMethod
		methods   []flexv1.DispatchMethod
		want      []flexv1.DispatchMethod
		wantField bool
	}{
		{name: "consent to the first method", consent: true, stored: nil, methods: dm(lpDM), want: dm(lpDM), wantField: true},
		{name: "consent appends new methods after the stored ones, in the order given", consent: true,
			stored: dm(lpDM, cmID), methods: dm(vppDM, fsDM), want: dm(lpDM, cmID, vppDM, fsDM), wantField: true},
		{name: "consent keeps the stored order when some are already given", consent: true,
			stored: dm(lpDM, cmID), methods: dm(cmID, fsDM, lpDM), want: dm(lpDM, cmID, fsDM), wantField: true},
		{name: "consent to what is given changes nothing", consent: true,
			stored: dm(cmID, lpDM), methods: dm(lpDM, cmID), want: dm(cmID, lpDM)},
		{name: "consent to nothing changes nothing", consent: true, stored: dm(lpDM), methods: nil, want: dm(lpDM)},
		{name: "consent to nothing on a site without consent changes nothing", consent: true, stored: nil, methods: dm(), want: nil},
		{name: "deconsent removes the methods, keeping the order of the rest",
			stored: dm(vppDM, lpDM, cmID, fsDM), methods: dm(cmID, vppDM), want: dm(lpDM, fsDM), wantField: true},
		{name: "deconsent of every method stores none", stored: dm(lpDM, cmID), methods: dm(cmID, lpDM), want: nil, wantField: true},
		{name: "deconsent of methods never given changes nothing", stored: dm(lpDM), methods: dm(cmID, fsDM), want: dm(lpDM)},
		{name: "deconsent on a site without consent changes nothing", stored: nil, methods: dm(lpDM), want: nil},
		{name: "deconsent of nothing changes nothing", stored: dm(lpDM, cmID), methods: nil, want: dm(lpDM, cmID)},
		{name: "deconsent of some given and some not", stored: dm(lpDM, cmID), methods: dm(fsDM, lpDM), want: dm(cmID), wantField: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stored := slices.Clone(tc.stored)
			spec := flexv1.SiteSpec{MPAN: "1200000000011", DispatchMethods: stored}
			change := DeconsentDispatch
			if tc.consent {
				change = ConsentDispatch
			}
			fields := change(&spec, tc.methods)
			if !slices.Equal(spec.DispatchMethods, tc.want) || (tc.want == nil) != (spec.DispatchMethods == nil) {
				t.Errorf("dispatch methods %#v, want %#v", spec.DispatchMethods, tc.want)
			}
			wantFields := []string(nil)
			if tc.wantField {
				wantFields = []string{"dispatch_methods"}
			}
			if !slices.Equal(fields, wantFields) {
				t.Errorf("fields %v, want %v", fields, wantFields)
			}
			if !slices.Equal(stored, tc.stored) {
				t.Errorf("the stored slice was changed in place: %v", stored)
			}
			if spec.MPAN != "1200000000011" {
				t.Errorf("another field changed: %+v", spec)
			}
			// Applying the same change again changes nothing: the result is a fixed point.
			again := spec.DeepCopy()
			if fields := change(again, tc.methods); fields != nil || !slices.Equal(again.DispatchMethods, spec.DispatchMethods) {
				t.Errorf("the same call again changes %v: %v", fields, again.DispatchMethods)
			}
		})
	}
}

// TestDispatchConsentRoundTrip: consenting to methods and deconsenting from the same methods
// leaves the stored methods as they were.
func TestDispatchConsentRoundTrip(t *testing.T) {
	all := []flexv1.DispatchMethod{cmID, fsDM, lpDM, vppDM}
	for mask := range 1 << len(all) {
		var stored []flexv1.DispatchMethod
		for i, m := range all {
			if mask&(1<<i) != 0 {
				stored = append(stored, m)
			}
		}
		for _, methods := range [][]flexv1.DispatchMethod{{vppDM}, {lpDM, fsDM}, all} {
			var fresh []flexv1.DispatchMethod
			for _, m := range methods {
				if !slices.Contains(stored, m) {
					fresh = append(fresh, m)
				}
			}
			spec := flexv1.SiteSpec{DispatchMethods: slices.Clone(stored)}
			ConsentDispatch(&spec, methods)
			DeconsentDispatch(&spec, fresh)
			if !slices.Equal(spec.DispatchMethods, stored) {
				t.Errorf("stored %v, consent and deconsent of the new ones among %v: %v", stored, methods, spec.DispatchMethods)
			}
		}
	}
}

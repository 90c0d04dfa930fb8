package household

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func TestReleaseInFlightAsset(t *testing.T) {
	until := t0.Add(time.Minute)
	marked := func(assets ...string) func(*flexv1.Site) {
		return func(s *flexv1.Site) {
			InFlight{Until: until, Assets: assets, Enrolments: []flexv1.PropositionName{lp}}.Mark(s)
			s.Status.ObservedGeneration = -1
		}
	}
	evaluated := func(s *flexv1.Site) { s.Status.ObservedGeneration = 1 }
	garbled := func(s *flexv1.Site) { s.Annotations[flexv1.InFlightAnnotation] = "{not json" }
	cases := []struct {
		name    string
		site    *flexv1.Site
		asset   string
		now     time.Time
		changed bool
		left    []string // the marker's assets afterwards, when it changed
	}{
		{name: "a named asset of a site not evaluated yet is released", site: testSite(marked("a", "b", "c")), asset: "b",
			now: t0, changed: true, left: []string{"a", "c"}},
		{name: "the last named asset is released", site: testSite(marked("a")), asset: "a", now: t0, changed: true, left: []string{}},
		{name: "past the deadline, before the marker is stale, it is still released", site: testSite(marked("a", "b")),
			asset: "a", now: until.Add(time.Minute), changed: true, left: []string{"b"}},
		{name: "an asset the marker does not name", site: testSite(marked("a", "b")), asset: "z", now: t0},
		{name: "a site without a marker", site: testSite(), asset: "a", now: t0},
		{name: "a site already evaluated: the marker binds nothing", site: testSite(marked("a"), evaluated), asset: "a", now: t0},
		{name: "a stale marker (restored from a backup)", site: testSite(marked("a")), asset: "a", now: until.Add(time.Hour)},
		{name: "an unreadable marker", site: testSite(marked("a"), garbled), asset: "a", now: t0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.site.DeepCopy()
			changed := ReleaseInFlightAsset(tc.site, tc.asset, tc.now)
			if changed != tc.changed {
				t.Fatalf("changed = %v, want %v", changed, tc.changed)
			}
			if !changed {
				if tc.site.Annotations[flexv1.InFlightAnnotation] != before.Annotations[flexv1.InFlightAnnotation] {
					t.Fatalf("the marker changed without saying so: %q", tc.site.Annotations[flexv1.InFlightAnnotation])
				}
				return
			}
			var m InFlight
			if err := json.Unmarshal([]byte(tc.site.Annotations[flexv1.InFlightAnnotation]), &m); err != nil {
				t.Fatalf("the released marker does not parse: %v", err)
			}
			if !slices.Equal(append([]string{}, m.Assets...), tc.left) {
				t.Errorf("assets left %v, want %v", m.Assets, tc.left)
			}
			if !m.Until.Equal(until) || !slices.Equal(m.Enrolments, []flexv1.PropositionName{lp}) {
				t.Errorf("the rest of the marker changed: %+v", m)
			}
		})
	}
}

package household

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func TestGrantOrigin(t *testing.T) {
	many := ""
	for i := range MaxAllowedOrigins {
		if i > 0 {
			many += " "
		}
		many += fmt.Sprintf("https://o%d.example", i)
	}
	tests := []struct {
		name, before, origin, after string
		changed                     bool
	}{
		{"first", "", "https://a.example", "https://a.example", true},
		{"already newest", "https://a.example", "https://a.example", "https://a.example", false},
		{"added", "https://a.example", "https://b.example", "https://a.example https://b.example", true},
		{"moved to newest", "https://a.example https://b.example", "https://a.example", "https://b.example https://a.example", true},
		{"empty refused", "https://a.example", "", "https://a.example", false},
		{"space refused", "", "https://a.example https://evil.example", "", false},
		{"oldest forgotten", many, "https://new.example", many[len("https://o0.example "):] + " https://new.example", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			site := &flexv1.Site{}
			if tc.before != "" {
				site.ObjectMeta = metav1.ObjectMeta{Annotations: map[string]string{flexv1.AllowedOriginsAnnotation: tc.before}}
			}
			if got := GrantOrigin(site, tc.origin); got != tc.changed {
				t.Errorf("changed = %v, want %v", got, tc.changed)
			}
			if got := site.Annotations[flexv1.AllowedOriginsAnnotation]; got != tc.after {
				t.Errorf("annotation = %q, want %q", got, tc.after)
			}
		})
	}
}

func TestOriginAllowed(t *testing.T) {
	site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		flexv1.AllowedOriginsAnnotation: "https://a.example http://localhost:3000"}}}
	for origin, want := range map[string]bool{
		"https://a.example": true, "http://localhost:3000": true, "https://b.example": false,
		"": false, "https://a.example.evil": false, "null": false,
	} {
		if got := OriginAllowed(site, origin); got != want {
			t.Errorf("OriginAllowed(%q) = %v, want %v", origin, got, want)
		}
	}
	if OriginAllowed(&flexv1.Site{}, "https://a.example") {
		t.Error("a site without the annotation allows nothing")
	}
}

package validation

import (
	"strings"
	"testing"
)

func TestProviderName(t *testing.T) {
	for name, want := range map[string]bool{
		"myenergi": true, "example-down": true, "client": true, "a": true, "p2": true, strings.Repeat("a", 63): true,
		"": false, strings.Repeat("a", 64): false, "-lead": false, "trail-": false, "Upper": false, "a/b": false,
		"a.b": false, "..": false, "a_b": false, "a b": false, "ünï": false,
	} {
		if got := ProviderName(name); got != want {
			t.Errorf("ProviderName(%q) = %v, want %v", name, got, want)
		}
	}
}

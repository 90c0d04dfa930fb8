package openadr

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for _, tc := range []struct {
		in    string
		want  time.Duration
		exact bool
		ok    bool
	}{
		{"PT30M", 30 * time.Minute, true, true},
		{"PT1H", time.Hour, true, true},
		{"PT0.5S", 500 * time.Millisecond, true, true},
		{"P1DT2H", 26 * time.Hour, true, true},
		{"P2W", 14 * 24 * time.Hour, true, true},
		{"-PT15M", -15 * time.Minute, true, true},
		{"P1M", 0, false, true},
		{"P1Y", 0, false, true},
		{"PT", 0, false, false},
		{"P", 0, false, false},
		{"PT30X", 0, false, false},
		{"30M", 0, false, false},
		{"", 0, false, false},
		{"P99999999999D", 0, false, false},
	} {
		got, exact, err := parseDuration(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%q: error %v, want ok %v", tc.in, err, tc.ok)
			continue
		}
		if tc.ok && exact != tc.exact {
			t.Errorf("%q: exact %v", tc.in, exact)
		}
		if tc.ok && tc.exact && got != tc.want {
			t.Errorf("%q: %s, want %s", tc.in, got, tc.want)
		}
	}
}

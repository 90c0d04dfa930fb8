package main

import "testing"

func TestMetricsURL(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		secure bool
		want   string
	}{
		{"0", true, ""},
		{"", false, ""},
		{"127.0.0.1:8082", false, "http://127.0.0.1:8082/metrics"},
		{":8443", true, "https://localhost:8443/metrics"},
		{"[::1]:8082", false, "http://[::1]:8082/metrics"},
	} {
		if got := metricsURL(tc.addr, tc.secure); got != tc.want {
			t.Errorf("metricsURL(%q, %v) = %q, want %q", tc.addr, tc.secure, got, tc.want)
		}
	}
}

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
	if opts := metricsOptions(":8443", true, ""); !opts.SecureServing || opts.FilterProvider == nil {
		t.Errorf("secure metrics options lack TLS or the authentication filter: %+v", opts)
	}
	if opts := metricsOptions("127.0.0.1:8082", false, ""); opts.SecureServing || opts.FilterProvider != nil {
		t.Errorf("insecure metrics options serve TLS or filter: %+v", opts)
	}
}

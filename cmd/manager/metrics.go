package main

import (
	"crypto/tls"
	"net"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The secure metrics endpoint asks the API server who a scraper is (TokenReview) and whether
// it may GET /metrics (SubjectAccessReview), as kubebuilder scaffolds it: a scraper needs the
// metrics-reader ClusterRole (config/rbac/metrics_reader_role.yaml).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// embeddedMetricsAddr is where --embedded serves the metrics unless told otherwise: plain HTTP
// on the loopback interface, so that a developer can curl it and point a local Prometheus at it.
const embeddedMetricsAddr = "127.0.0.1:8082"

// metricsOptions is the metrics server of the flags: off for "0"; HTTPS with authentication
// and authorization when secure; plain HTTP otherwise.
func metricsOptions(addr string, secure bool, certDir string) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: addr}
	if !secure {
		return opts
	}
	opts.SecureServing = true
	opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	// Without tls.crt/tls.key in CertDir, controller-runtime serves a self-signed certificate.
	opts.CertDir = certDir
	// HTTP/2 off, as kubebuilder scaffolds it: its stream handling had denial-of-service
	// flaws (CVE-2023-44487, CVE-2023-39325) and a scrape gains nothing from it.
	opts.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	return opts
}

// metricsURL is the address to scrape, for the log ("" when the endpoint is off).
func metricsURL(addr string, secure bool) string {
	if addr == "0" || addr == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "localhost"
	}
	scheme := "http"
	if secure {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port) + "/metrics"
}

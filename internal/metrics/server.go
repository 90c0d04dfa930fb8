package metrics

import (
	"crypto/tls"

	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The secure metrics endpoint asks the API server who a scraper is (TokenReview) and whether
// it may GET /metrics (SubjectAccessReview), as kubebuilder scaffolds it: a scraper needs the
// metrics-reader ClusterRole (config/rbac/metrics_reader_role.yaml).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// ServerOptions is the manager's metrics server: off for "0"; HTTPS with authentication
// and authorization when secure; plain HTTP otherwise.
func ServerOptions(addr string, secure bool, certDir string) metricsserver.Options {
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

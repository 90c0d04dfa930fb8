// Command manager runs Flexsite: the Site, Asset and Enrolment controllers and the REST
// REST API, in one process. Against a cluster it uses the kubeconfig (--kubeconfig, $KUBECONFIG)
// or in-cluster config, with leader election for the controllers; with --embedded it first
// starts a local control plane (etcd + kube-apiserver) and bootstraps a demo organisation.
package main

import (
	"flag"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// main parses the flags (flags.go) and runs the manager for its tier (run.go).
func main() {
	o, zapOpts := bindFlags(flag.CommandLine)
	flag.Parse()
	o.settle(flag.CommandLine)
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(zapOpts)))
	if err := run(ctrl.SetupSignalHandler(), *o); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// hostname is the machine's name ("" if it has none to tell).
func hostname() string {
	h, _ := os.Hostname()
	return h
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

package controllers

import (
	"context"
	"errors"
	"testing"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// There is no mode without a database: wiring the controllers without one is refused at
// setup, before any reconciler runs (it once ran them, reading and writing the reward history
// in RewardLedgers' specs and telling no notification).
func TestSetupRefusesNoDatabase(t *testing.T) {
	// A manager is only built here, never started: nothing connects to this address.
	mgr, err := ctrl.NewManager(&rest.Config{Host: "http://127.0.0.1:1"},
		ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := SetupWithManager(context.Background(), mgr); !errors.Is(err, errNoDatabase) {
		t.Errorf("SetupWithManager without Options.DB: %v, want errNoDatabase", err)
	}
	if err := SetupWithManager(context.Background(), mgr, Options{Concurrency: 1}); !errors.Is(err, errNoDatabase) {
		t.Errorf("SetupWithManager with Options but no DB: %v, want errNoDatabase", err)
	}
	for name, setup := range map[string]func() error{
		"RewardLedger":     func() error { return (&RewardLedgerReconciler{}).SetupWithManager(mgr, controller.Options{}) },
		"DeviceConnection": func() error { return (&DeviceConnectionReconciler{}).SetupWithManager(mgr, controller.Options{}) },
		"Site":             func() error { return (&SiteReconciler{}).SetupWithManager(mgr, controller.Options{}) },
	} {
		if err := setup(); !errors.Is(err, errNoDatabase) {
			t.Errorf("the %s reconciler without a database: %v, want errNoDatabase", name, err)
		}
	}
}

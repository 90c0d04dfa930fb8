package controllers

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/flexsite/flexsite/internal/index"
)

// SetupWithManager registers the cache indexes and every Flexsite reconciler with mgr.
func SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := index.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := (&SiteReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("site-controller"), Now: time.Now,
	}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := (&AssetReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	return (&EnrolmentReconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("enrolment-controller"), Now: time.Now,
	}).SetupWithManager(mgr)
}

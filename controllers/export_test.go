package controllers

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/index"
)

// WriteAssetStatus writes asset's status against base as every reconciler writes a status
// (summary.patch), with err as the reconcile's outcome: for the suite's specs of how a write's
// own failures are judged.
func WriteAssetStatus(ctx context.Context, c client.Client, base, asset *flexv1.Asset, err error) (ctrl.Result, error) {
	return summary{client: c}.patch(ctx, base, asset, "ready", err)
}

// EvaluateSite runs the Site reconciler's evaluation of site (Reconcile's work between its read
// and its status write, into site's status) on mgr's cache, client and reader of the API
// server: for the suite's specs of what a replica whose cache lacks part of a household (a
// shard it is moving to) computes.
func EvaluateSite(ctx context.Context, mgr ctrl.Manager, site *flexv1.Site) error {
	r := &SiteReconciler{Client: index.CachedClient{Client: mgr.GetClient(), Cache: mgr.GetCache()},
		APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("site-controller-spec"), Now: time.Now}
	return r.reconcile(ctx, site)
}

package controllers

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// WriteAssetStatus writes asset's status against base as every reconciler writes a status
// (summary.patch), with err as the reconcile's outcome: for the suite's specs of how a write's
// own failures are judged.
func WriteAssetStatus(ctx context.Context, c client.Client, base, asset *flexv1.Asset, err error) (ctrl.Result, error) {
	return summary{client: c}.patch(ctx, base, asset, "ready", err)
}

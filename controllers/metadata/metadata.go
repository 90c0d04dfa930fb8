// Package metadata is what the controllers own in an object's metadata: the Flexsite
// finalizer and the API id label, each added or removed by a patch.
package metadata

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
)

// Ensure adds what the controllers own in an object's metadata, in one patch:
// the Flexsite finalizer (when withFinalizer) and, when withID, an API id label for objects
// created without one (kubectl or GitOps; the REST API and the defaulting webhook set it
// at creation). The patch carries the resourceVersion, so a concurrent change is a conflict,
// not a lost finalizer.
func Ensure(ctx context.Context, c client.Client, obj client.Object, withFinalizer, withID bool) error {
	needFinalizer := withFinalizer && !controllerutil.ContainsFinalizer(obj, flexv1.Finalizer)
	needID := withID && obj.GetLabels()[flexv1.IDLabel] == ""
	if !needFinalizer && !needID {
		return nil
	}
	base := obj.DeepCopyObject().(client.Object)
	if needFinalizer {
		controllerutil.AddFinalizer(obj, flexv1.Finalizer)
	}
	if needID {
		household.EnsureID(obj)
	}
	return c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
}

// RemoveFinalizer lets the API server finish deleting obj.
func RemoveFinalizer(ctx context.Context, c client.Client, obj client.Object) error {
	if !controllerutil.ContainsFinalizer(obj, flexv1.Finalizer) {
		return nil
	}
	base := obj.DeepCopyObject().(client.Object)
	controllerutil.RemoveFinalizer(obj, flexv1.Finalizer)
	return client.IgnoreNotFound(c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})))
}

package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/index"
)

// AssetReconciler gives an Asset its API id and reports whether its Site exists. An Asset's
// eligibility is part of its Site's status; deletion needs no finalizer (nothing to clean up).
type AssetReconciler struct {
	client.Client
	// APIReader confirms a site the cache does not have yet (an asset created right after its
	// site): without it the asset would first be marked SiteNotFound, then corrected.
	APIReader client.Reader
}

// +kubebuilder:rbac:groups=flexsite.io,resources=assets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=assets/status,verbs=get;update;patch

// Reconcile fetches the Asset, ensures its id and writes its Ready condition in one patch.
func (r *AssetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	asset := &flexv1.Asset{}
	if err := r.Get(ctx, req.NamespacedName, asset); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !asset.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if err := ensureMetadata(ctx, r.Client, asset, false, true); err != nil {
		return resultFor(err)
	}

	ready := metav1.Condition{Type: flexv1.ReadyCondition, ObservedGeneration: asset.Generation}
	site := &flexv1.Site{}
	siteKey := types.NamespacedName{Namespace: asset.Namespace, Name: asset.Spec.SiteName}
	err := r.Get(ctx, siteKey, site)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		err = r.APIReader.Get(ctx, siteKey, site)
	}
	switch {
	case apierrors.IsNotFound(err):
		ready.Status, ready.Reason = metav1.ConditionFalse, flexv1.ReasonSiteNotFound
		ready.Message = fmt.Sprintf("Site %q does not exist in namespace %q", asset.Spec.SiteName, asset.Namespace)
	case err != nil:
		return resultFor(err)
	case !site.DeletionTimestamp.IsZero():
		ready.Status, ready.Reason = metav1.ConditionFalse, flexv1.ReasonSiteDeleting
		ready.Message = fmt.Sprintf("Site %q is being deleted", site.Name)
	default:
		ready.Status, ready.Reason = metav1.ConditionTrue, flexv1.ReasonReconciled
		ready.Message = fmt.Sprintf("Registered at site %q", site.Name)
	}

	base := asset.DeepCopy()
	asset.Status.ObservedGeneration = asset.Generation
	meta.SetStatusCondition(&asset.Status.Conditions, ready)
	if equality.Semantic.DeepEqual(base.Status, asset.Status) {
		return ctrl.Result{}, nil
	}
	return resultFor(r.Status().Patch(ctx, asset, client.MergeFrom(base)))
}

// SetupWithManager watches Assets, and Sites coming and going (which changes Ready).
func (r *AssetReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&flexv1.Asset{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Watches(&flexv1.Site{}, handler.EnqueueRequestsFromMapFunc(r.assetsOfSite),
			builder.WithPredicates(siteCameOrWent)).
		Named("asset").
		WithOptions(opts).
		Complete(r)
}

// siteCameOrWent passes a Site's creation, deletion and the start of its deletion.
var siteCameOrWent = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
	},
}

func (r *AssetReconciler) assetsOfSite(ctx context.Context, site client.Object) []reconcile.Request {
	return childrenOf(ctx, r.Client, &flexv1.AssetList{}, site)
}

// childrenOf lists (from the cache) the objects whose spec.siteName names the site.
func childrenOf(ctx context.Context, c client.Reader, list client.ObjectList, site client.Object) []reconcile.Request {
	if err := c.List(ctx, list, client.InNamespace(site.GetNamespace()),
		client.MatchingFields{index.SiteName: site.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing children of a site", "site", site.GetName())
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, len(items))
	for i, item := range items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(item.(client.Object))}
	}
	return reqs
}

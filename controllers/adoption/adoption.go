// Package adoption gives a site's children written without their controller reference their
// site as controller, where no Site reconciler runs beside the doors (the API tier).
package adoption

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/index"
)

// Reconciler gives a site's children that lack their controller reference (written
// by kubectl or GitOps) their site as controller, as the Site reconciler does for its own
// sites. It runs in the API tier (docs/scale.md, "Two tiers"): a controller tier shard caches
// only what the sharder has assigned to it, and a child without its controller is assigned to
// no shard until it is adopted, so no shard would ever see it. The API tier caches every
// household; once adopted, the sharder puts the child on its site's shard.
//
// +kubebuilder:rbac:groups=flexsite.io,resources=sites;assets;enrolments;deviceconnections;rewardledgers,verbs=get;list;watch
// +kubebuilder:rbac:groups=flexsite.io,resources=assets;enrolments;deviceconnections;rewardledgers,verbs=patch
type Reconciler struct {
	client.Client
}

// Reconcile adopts the site's unadopted children (householdstore.AdoptChildren, one patch
// each). A child whose site does not exist yet waits for it: the site's creation comes here.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	site := &flexv1.Site{}
	if err := r.Get(ctx, req.NamespacedName, site); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !site.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	assets, err := index.NewLookup(r.Client).AssetsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	// A conflict (the child changed meanwhile) is an error: requeued, it meets the stored child.
	return ctrl.Result{}, householdstore.AdoptChildren(ctx, r.Client, site, assets)
}

// unadopted passes the events of a child without a controller reference.
var unadopted = predicate.NewPredicateFuncs(func(obj client.Object) bool {
	return metav1.GetControllerOfNoCopy(obj) == nil && obj.GetDeletionTimestamp().IsZero()
})

// SetupWithManager watches the children without a controller, and the sites' creation (a
// child may come before its site).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	createdOnly := predicate.Funcs{
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&flexv1.Site{}, builder.WithPredicates(createdOnly)).
		Named("adoption").
		WithOptions(opts)
	for _, child := range []client.Object{&flexv1.Asset{}, &flexv1.Enrolment{}, &flexv1.DeviceConnection{}, &flexv1.RewardLedger{}} {
		b = b.Watches(child, handler.EnqueueRequestsFromMapFunc(siteOf), builder.WithPredicates(unadopted))
	}
	return b.Complete(r)
}

// siteOf maps a child to its Site.
func siteOf(_ context.Context, obj client.Object) []ctrl.Request {
	name := household.SiteNameOf(obj)
	if name == "" {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}}}
}

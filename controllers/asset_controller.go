package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers/metadata"
	"github.com/flexsite/flexsite/internal/deviceauth"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/shards"
	"github.com/flexsite/flexsite/internal/statuswrites"
)

// AssetReconciler gives an Asset its API id and reports whether it is in effect: counted in
// its Site's eligibility. An Asset's eligibility is part of its Site's status; deletion needs
// no finalizer (nothing to clean up).
type AssetReconciler struct {
	// Shard, when set, is the replica's part of the ring: only its objects are reconciled here.
	Shard *shards.Replica
	client.Client
	// APIReader confirms a site the cache does not have yet (an asset created right after its
	// site): without it the asset would first be reported SiteNotFound, then corrected.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	// Notifier writes the asset's events to the outbox.
	Notifier notifier
	// written: this reconciler's status writes the cache has yet to show.
	written statuswrites.Writes
}

// +kubebuilder:rbac:groups=flexsite.io,resources=assets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=assets/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=assetmodels,verbs=get;list;watch

// Reconcile fetches the Asset, ensures its id and writes its conditions in one patch.
func (r *AssetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	asset := &flexv1.Asset{}
	if done, res, err := r.written.Fetch(ctx, r.Client, req.NamespacedName, asset); done {
		return res, err
	}
	if !asset.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	err := metadata.Ensure(ctx, r.Client, asset, false, true)
	base := asset.DeepCopy()
	if err == nil {
		err = r.reconcile(ctx, asset)
	}
	if rerr := r.recordEvents(ctx, base, asset, err); rerr != nil {
		// Not written: the status waits with its event, and both are tried again.
		return ctrl.Result{}, rerr
	}
	return summary{client: r.Client, recorder: r.Recorder, written: &r.written}.patch(ctx, base, asset,
		fmt.Sprintf("Counted in the eligibility of site %q", asset.Spec.SiteName), err)
}

// recordEvents writes the asset's events (created, updated) to the outbox before the status
// patch that records the generation observed: every outcome writes it but a brief wait on an
// asset never observed (which writes nothing, so the event waits with it).
func (r *AssetReconciler) recordEvents(ctx context.Context, base, asset *flexv1.Asset, err error) error {
	if !writesStatus(base, err) {
		return nil
	}
	after := asset.DeepCopy()
	after.Status.ObservedGeneration = asset.Generation
	siteID, gerr := siteIDOf(ctx, r.Client, asset.Namespace, asset.Spec.SiteName)
	if gerr != nil {
		return gerr
	}
	return r.Notifier.report(ctx, asset, "asset", events.AssetEvents(base, after, siteID), time.Now())
}

// reconcile finds the asset's site and whether the site's evaluated status counts the asset,
// and whether its owner must re-authorise its device connection.
func (r *AssetReconciler) reconcile(ctx context.Context, asset *flexv1.Asset) error {
	needs, err := r.needsReauthorisation(ctx, asset)
	if err != nil {
		return err
	}
	if needs != asset.Status.NeedsReauthorisation {
		asset.Status.NeedsReauthorisation = needs
		r.tellReauthorisation(asset)
	}
	site := &flexv1.Site{}
	siteKey := types.NamespacedName{Namespace: asset.Namespace, Name: asset.Spec.SiteName}
	err = r.Get(ctx, siteKey, site)
	if apierrors.IsNotFound(err) && r.APIReader != nil {
		err = r.APIReader.Get(ctx, siteKey, site)
	}
	switch {
	case apierrors.IsNotFound(err):
		return stalled(flexv1.ReasonSiteNotFound,
			fmt.Sprintf("Site %q does not exist in namespace %q", asset.Spec.SiteName, asset.Namespace))
	case err != nil:
		return err
	case !site.DeletionTimestamp.IsZero():
		return waiting(0, flexv1.ReasonSiteDeleting, fmt.Sprintf("Site %q is being deleted", site.Name))
	case !slices.ContainsFunc(site.Status.Assets, func(a flexv1.AssetEligibility) bool { return a.Name == asset.Name }):
		// The site's next evaluation counts the asset; its status change brings us back here.
		return waitingBriefly(0, flexv1.ReasonEligibilityPending,
			fmt.Sprintf("Waiting for site %q to evaluate the asset", site.Name))
	}
	return nil
}

// SetupWithManager watches Assets, and their Sites' evaluations and coming and going.
func (r *AssetReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&flexv1.Asset{}, builder.WithPredicates(r.Shard.For(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{})))).
		// A site's assets are on its shard.
		Watches(&flexv1.Site{}, handler.EnqueueRequestsFromMapFunc(r.assetsOfSite),
			builder.WithPredicates(predicate.NewPredicateFuncs(r.Shard.Mine), siteCameWentOrEvaluated)).
		// needsReauthorisation: the site's device connections, and the provider of each model.
		Watches(&flexv1.DeviceConnection{}, handler.EnqueueRequestsFromMapFunc(assetsOfConnection(r.Client)),
			builder.WithPredicates(predicate.NewPredicateFuncs(r.Shard.Mine), connectionLapseChanged)).
		Watches(&flexv1.AssetModel{}, handler.EnqueueRequestsFromMapFunc(r.assetsOfModel),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("asset").
		WithOptions(opts).
		Complete(r.Shard.Sharded("asset", &flexv1.Asset{}, mgr.GetClient(), r))
}

// siteCameWentOrEvaluated passes a Site's creation, deletion, the start of its deletion and
// a change of the assets its status counts.
var siteCameWentOrEvaluated = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldSite, okOld := e.ObjectOld.(*flexv1.Site)
		newSite, okNew := e.ObjectNew.(*flexv1.Site)
		if !okOld || !okNew {
			return false
		}
		return oldSite.DeletionTimestamp.IsZero() != newSite.DeletionTimestamp.IsZero() ||
			!slices.EqualFunc(oldSite.Status.Assets, newSite.Status.Assets,
				func(a, b flexv1.AssetEligibility) bool { return a.Name == b.Name })
	},
}

// connectionLapseChanged passes a connection's coming, going and a change of whether it
// lapsed.
var connectionLapseChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*flexv1.DeviceConnection)
		n, okNew := e.ObjectNew.(*flexv1.DeviceConnection)
		return okOld && okNew && deviceauth.Lapsed(o) != deviceauth.Lapsed(n)
	},
}

// needsReauthorisation: the asset's site has a connection, for the provider of the asset's
// model or the client's own covering every asset, that lapsed (docs/api.md, "Device connections").
func (r *AssetReconciler) needsReauthorisation(ctx context.Context, asset *flexv1.Asset) (bool, error) {
	providers := []string{flexv1.ClientProvider}
	if asset.Spec.Model != "" {
		models := &flexv1.AssetModelList{}
		if err := r.List(ctx, models); err != nil {
			return false, err
		}
		if p := deviceauth.ProviderOfModel(models.Items, asset.Spec.Model); p != "" {
			providers = append(providers, p)
		}
	}
	for _, p := range providers {
		conn := &flexv1.DeviceConnection{}
		err := r.Get(ctx, types.NamespacedName{Namespace: asset.Namespace,
			Name: identity.DeviceConnectionName(asset.Spec.SiteName, p)}, conn)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return false, err
		}
		if deviceauth.Lapsed(conn) {
			return true, nil
		}
	}
	return false, nil
}

// tellReauthorisation records an Event on the asset when its flag changes.
func (r *AssetReconciler) tellReauthorisation(asset *flexv1.Asset) {
	if r.Recorder == nil {
		return
	}
	if asset.Status.NeedsReauthorisation {
		r.Recorder.Eventf(asset, nil, corev1.EventTypeWarning, "NeedsReauthorisation", "Reconcile",
			"The owner must re-authorise the device connection to keep taking part in events")
		return
	}
	r.Recorder.Eventf(asset, nil, corev1.EventTypeNormal, "Reauthorised", "Reconcile",
		"The device connection is authorised again")
}

func (r *AssetReconciler) assetsOfModel(ctx context.Context, obj client.Object) []reconcile.Request {
	model, ok := obj.(*flexv1.AssetModel)
	if !ok {
		return nil
	}
	assets, err := index.NewLookup(r.Client).AssetsOfModel(ctx, model.Spec.ModelName)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing the assets of a model", "model", model.Spec.ModelName)
		return nil
	}
	reqs := make([]reconcile.Request, len(assets))
	for i, a := range assets {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(a)}
	}
	return reqs
}

func (r *AssetReconciler) assetsOfSite(ctx context.Context, site client.Object) []reconcile.Request {
	return childrenOf(ctx, index.NewLookup(r.Client).AssetsOfSite, site)
}

// childrenOf finds (in the cache: a Lookup's ...OfSite) the objects of the site.
func childrenOf[T client.Object](ctx context.Context, find func(ctx context.Context, ns, siteName string) ([]T, error),
	site client.Object) []reconcile.Request {
	items, err := find(ctx, site.GetNamespace(), site.GetName())
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing children of a site", "site", site.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, len(items))
	for i, item := range items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(item)}
	}
	return reqs
}

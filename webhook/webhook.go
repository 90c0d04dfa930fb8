// Package admission holds Flexsite's admission webhooks: defaulting (normalising what people
// type: postcode case and spacing, spaces in an MPAN) and validation for Site, Asset,
// Enrolment and FlexEvent, the cap on an organisation's Subscriptions, and the uniqueness of
// API client usernames across organisations (internal/tenancy). The rules are
// internal/validation's, the very functions the REST API uses, so kubectl, GitOps and API
// clients meet the same checks, with errors that name the field (`spec.mpan: Invalid value: ...`).
//
// Defaulting never sets ids, labels or finalizers: under server-side apply those would be
// owned by whoever applied the object and could be dropped or churned by the next apply. The
// controllers own them.
package admission

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/validation"
)

// Options are the bounds the webhooks hold objects to, the same the REST API is given.
type Options struct {
	// MaxSubscriptions is how many Subscriptions an organisation may have (0:
	// validation.DefaultMaxSubscriptions).
	MaxSubscriptions int
	// Cache is what the webhooks' rules read other objects through (nil: the manager's cache,
	// with the internal/index indexes). A suite may hand one that lags behind the API server
	// for chosen objects, as a cache does for a moment after they are stored.
	Cache client.Reader
}

// Setup registers the webhooks of every Flexsite kind with the manager's webhook server.
func Setup(mgr ctrl.Manager, opts Options) error {
	if opts.MaxSubscriptions <= 0 {
		opts.MaxSubscriptions = validation.DefaultMaxSubscriptions
	}
	// The cache itself, not the client: its unique keys are looked up by bucket (index.NewLookup).
	lookups := &lookups{cache: opts.Cache, api: mgr.GetAPIReader()}
	if lookups.cache == nil {
		lookups.cache = mgr.GetCache()
	}
	now := time.Now
	if err := ctrl.NewWebhookManagedBy(mgr, &flexv1.Site{}).
		WithDefaulter(&siteDefaulter{}).WithValidator(&siteValidator{lookups: lookups, now: now}).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &flexv1.Asset{}).
		WithValidator(&assetValidator{lookups: lookups, now: now}).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &flexv1.Enrolment{}).
		WithValidator(&enrolmentValidator{lookups: lookups, client: mgr.GetClient(), now: now}).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &flexv1.FlexEvent{}).
		WithValidator(&flexEventValidator{lookups: lookups, now: now}).Complete(); err != nil {
		return err
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &flexv1.Subscription{}).
		WithValidator(&subscriptionValidator{cache: mgr.GetCache(), maxSubs: opts.MaxSubscriptions}).Complete(); err != nil {
		return err
	}
	return ctrl.NewWebhookManagedBy(mgr, &flexv1.APIClient{}).
		WithValidator(&apiClientValidator{client: mgr.GetClient(), cache: mgr.GetCache(), api: mgr.GetAPIReader(), now: now}).Complete()
}

// lookups reads what a rule needs from other objects: from the cache, and from the API server
// when the cache misses, because `kubectl apply -f household.yaml` creates a Site and its
// Assets within milliseconds, faster than the cache sees the Site.
type lookups struct {
	cache client.Reader
	api   client.Reader
}

func (l *lookups) site(ctx context.Context, ns, name string) (*flexv1.Site, error) {
	site := &flexv1.Site{}
	key := client.ObjectKey{Namespace: ns, Name: name}
	err := l.cache.Get(ctx, key, site)
	if apierrors.IsNotFound(err) {
		err = l.api.Get(ctx, key, site)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return site, err
}

func invalid(kind string, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(schema.GroupKind{Group: flexv1.GroupVersion.Group, Kind: kind}, name, errs)
}

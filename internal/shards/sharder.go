package shards

import (
	"context"
	"fmt"
	"time"

	configv1alpha1 "github.com/timebertt/kubernetes-controller-sharding/pkg/apis/config/v1alpha1"
	shardingv1alpha1 "github.com/timebertt/kubernetes-controller-sharding/pkg/apis/sharding/v1alpha1"
	sharder "github.com/timebertt/kubernetes-controller-sharding/pkg/controller"
	sharderwebhook "github.com/timebertt/kubernetes-controller-sharding/pkg/webhook"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// AddToScheme adds the sharder's kinds (ControllerRing).
func AddToScheme(s *runtime.Scheme) error { return shardingv1alpha1.AddToScheme(s) }

// CacheByObject is what the sharder reads through a cache: only the Leases of a ring (the
// shard leases), never every Lease of the cluster. index.CacheOptions adds it.
func CacheByObject() map[client.Object]cache.ByObject {
	ofRing, err := labels.NewRequirement(shardingv1alpha1.LabelControllerRing, selection.Exists, nil)
	utilruntime.Must(err)
	return map[client.Object]cache.ByObject{&coordinationv1.Lease{}: {Label: labels.NewSelector().Add(*ofRing)}}
}

// SharderOptions run the sharder inside the manager (make run, tests). A cluster install runs
// the upstream sharder as its own Deployment instead (the chart's sharding.enabled).
type SharderOptions struct {
	// Webhook is how the API server reaches the sharder's webhook, which this manager's
	// webhook server serves: a URL and the CA of its certificate.
	Webhook admissionregistrationv1.WebhookClientConfig
	// SyncPeriod is how often the sharder assigns what its webhook missed (zero: the
	// sharder's default, 5 minutes).
	SyncPeriod time.Duration
}

// AddSharder adds the sharder's controllers (under mgr's leader lease, as they need one), its
// webhook, and the ring: the ring is applied once the manager leads.
func AddSharder(ctx context.Context, mgr manager.Manager, o SharderOptions) error {
	config := &configv1alpha1.SharderConfig{
		Webhook: configv1alpha1.Webhook{Config: &configv1alpha1.WebhookConfig{ClientConfig: o.Webhook.DeepCopy()}},
	}
	if o.SyncPeriod > 0 {
		config.Controller.Sharder = &configv1alpha1.SharderController{SyncPeriod: &metav1.Duration{Duration: o.SyncPeriod}}
	}
	configv1alpha1.SetObjectDefaults_SharderConfig(config)
	if err := sharder.AddToManager(ctx, mgr, config); err != nil {
		return fmt.Errorf("shards: the sharder's controllers: %w", err)
	}
	if err := sharderwebhook.AddToManager(ctx, mgr, config); err != nil {
		return fmt.Errorf("shards: the sharder's webhook: %w", err)
	}
	// The ring is applied once this replica leads, and again until it is (an API server
	// that is briefly away does not stop the leader).
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		log := logf.FromContext(ctx).WithName("sharder")
		return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			if err := ApplyRing(ctx, mgr.GetClient()); err != nil {
				log.Error(err, "applying the ControllerRing, trying again")
				return false, nil
			}
			return true, nil
		})
	}))
}

// ApplyRing creates or updates Flexsite's ControllerRing (server-side apply: it owns the spec,
// and nothing else of it).
func ApplyRing(ctx context.Context, c client.Client) error {
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(Ring())
	if err != nil {
		return err
	}
	ring := &unstructured.Unstructured{Object: fields}
	unstructured.RemoveNestedField(ring.Object, "status")
	unstructured.RemoveNestedField(ring.Object, "metadata", "creationTimestamp")
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(ring), client.FieldOwner("flexsite"), client.ForceOwnership); err != nil {
		return fmt.Errorf("shards: applying ControllerRing %s: %w", RingName, err)
	}
	return nil
}

package index

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/shards"
)

// CredentialsLabels are the labels of a Secret that holds an API client's password hash
// (flexv1.CredentialsLabel): the manager reads no Secret of an organisation without them.
func CredentialsLabels() map[string]string {
	return map[string]string{flexv1.CredentialsLabel: "true"}
}

// CredentialSecrets selects the Secrets that carry CredentialsLabels.
var CredentialSecrets = labels.SelectorFromSet(CredentialsLabels())

// CacheOptions is what the manager's cache holds (cmd/manager and the test suites share it).
func CacheOptions() cache.Options {
	byObject := map[client.Object]cache.ByObject{
		// The reward history is the database's: the cache keeps ledgers without their
		// transactions and what no reader of the cache needs (withoutTransactions).
		&flexv1.RewardLedger{}: {Transform: withoutTransactions},
	}
	// The sharder, where the manager runs it, reads only the shard leases (no informer starts
	// unless it does).
	maps.Copy(byObject, shards.CacheByObject())
	return cache.Options{
		// Nothing reads managedFields from the cache; dropping them saves a sixth of its
		// memory. Texts that every object repeats are shared (compactForCache).
		DefaultTransform: compactForCache,
		// No Secret is cached: the manager may not list or watch Secrets (it reads the few it
		// needs with namespaced GETs, ClientOptions).
		ByObject: byObject,
	}
}

// ClientOptions is how the manager's client reads. It reads Secrets from the API server, never
// the cache: the manager may not list or watch Secrets anywhere (a cached read would start an
// informer over every namespace, and fail), and a rotated key must be seen at once.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}
}

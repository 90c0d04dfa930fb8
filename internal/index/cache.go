package index

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
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
	return cache.Options{
		// Nothing reads managedFields from the cache; dropping them saves a sixth of its
		// memory. Texts that every object repeats are shared (compactForCache).
		DefaultTransform: compactForCache,
		// The API server sends the cache the credential Secrets only: every other Secret of
		// the cluster stays out of the manager's memory and out of reach of a bug in it.
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Label: CredentialSecrets},
			// The reward history is the database's: the cache keeps ledgers without their
			// transactions and what no reader of the cache needs (withoutTransactions).
			&flexv1.RewardLedger{}: {Transform: withoutTransactions},
		},
	}
}

// ClientOptions is how the manager's client reads. It reads Secrets from the API server, not
// the cache: the token signing keys (in the manager's namespace, not a credential Secret, so
// not in the cache) must be found, and a rotation seen at once. The authenticator reads the
// credential Secrets from the cache itself.
func ClientOptions() client.Options {
	return client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}}
}

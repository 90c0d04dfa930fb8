package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// activeKey is the Secret data entry that names the kid new tokens are signed with.
	activeKey = "active"
	// keySuffix ends every Secret data entry that holds a private key: "<kid>.key".
	keySuffix = ".key"
	// reloadInterval bounds how often a token with an unknown kid may make the ring re-read
	// the Secret: anyone can send such a token, and each reload is an API call.
	reloadInterval = 10 * time.Second
)

var errUnknownKid = errors.New("unknown key id")

// The key ring's Secret lives in the manager's own namespace, the only one where the manager
// may get, create and update Secrets (a Role, which kustomize moves to the namespace it
// deploys to).
// +kubebuilder:rbac:groups="",namespace=flexsite-system,resources=secrets,verbs=get;create;update

// KeyRing holds Ed25519 signing keys with key ids (kid) for rotation. Keys live in a Secret
// with data entries "<kid>.key" (a PEM-encoded PKCS#8 Ed25519 private key) and "active" (the
// kid that signs new tokens). A key keeps verifying until it is removed from the Secret, so a
// rotation is: add a key, switch "active", remove the old key once its tokens have expired
// (OrganisationTokenTTL / EndUserTokenTTL later).
//
// A KeyRing is safe for concurrent use.
type KeyRing struct {
	reader client.Reader
	writer client.Client
	key    client.ObjectKey

	mu     sync.RWMutex
	keys   map[string]ed25519.PrivateKey // replaced as a whole, never modified
	active string

	reloadMu   sync.Mutex // serialises reloads triggered by unknown kids
	lastReload time.Time  // of the last reload triggered by an unknown kid
}

// NewKeyRing returns a key ring kept in the Secret namespace/name. reader must read from the
// API server (a manager's APIReader): the manager's cache holds credential Secrets only, and
// a rotation must be seen as soon as it happened. The ring is empty until Ensure.
func NewKeyRing(reader client.Reader, writer client.Client, namespace, name string) *KeyRing {
	return &KeyRing{reader: reader, writer: writer, key: client.ObjectKey{Namespace: namespace, Name: name}}
}

// Ensure loads the keys, creating the Secret with one fresh key if it does not exist yet.
// With several replicas starting at once exactly one Create wins; the others get
// AlreadyExists and load the winner's key, so all replicas share one key.
func (k *KeyRing) Ensure(ctx context.Context) error {
	err := k.Reload(ctx)
	if !apierrors.IsNotFound(err) {
		return err
	}
	kid, pemKey, err := newKey()
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.key.Namespace, Name: k.key.Name},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{kid + keySuffix: pemKey, activeKey: []byte(kid)},
	}
	if err := k.writer.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating signing key secret %s: %w", k.key, err)
	}
	return k.Reload(ctx)
}

// Reload re-reads the Secret, picking up added, removed and newly active keys. On error the
// ring keeps the keys it had.
func (k *KeyRing) Reload(ctx context.Context) error {
	secret := &corev1.Secret{}
	if err := k.reader.Get(ctx, k.key, secret); err != nil {
		// Unwrapped, so that Ensure can tell NotFound.
		return err
	}
	keys, active, err := parseKeys(secret.Data)
	if err != nil {
		return fmt.Errorf("signing key secret %s: %w", k.key, err)
	}
	k.mu.Lock()
	k.keys, k.active = keys, active
	k.mu.Unlock()
	return nil
}

// signingKey returns the active key and its kid.
func (k *KeyRing) signingKey() (string, ed25519.PrivateKey, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	key, ok := k.keys[k.active]
	if !ok {
		return "", nil, errors.New("key ring not loaded")
	}
	return k.active, key, nil
}

// lookup returns the public key of kid, if the ring holds it.
// has tells whether kid is still in the ring (a removed key's tokens stop verifying at once),
// without deriving its public key.
func (k *KeyRing) has(kid string) bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	_, ok := k.keys[kid]
	return ok
}

func (k *KeyRing) lookup(kid string) (ed25519.PublicKey, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	key, ok := k.keys[kid]
	if !ok {
		return nil, false
	}
	return key.Public().(ed25519.PublicKey), true
}

// verificationKey returns the public key of kid. An unknown kid may be a key another replica
// just rotated in, so it triggers a reload, at most one per reloadInterval (measured with
// now) however many such tokens arrive.
func (k *KeyRing) verificationKey(ctx context.Context, kid string, now time.Time) (ed25519.PublicKey, error) {
	if key, ok := k.lookup(kid); ok {
		return key, nil
	}
	k.reloadMu.Lock()
	defer k.reloadMu.Unlock()
	// Another request may have reloaded while this one waited for the lock.
	if key, ok := k.lookup(kid); ok {
		return key, nil
	}
	if !k.lastReload.IsZero() && now.Sub(k.lastReload) < reloadInterval {
		return nil, errUnknownKid
	}
	k.lastReload = now
	if err := k.Reload(ctx); err != nil {
		return nil, fmt.Errorf("%w (reloading keys: %w)", errUnknownKid, err)
	}
	if key, ok := k.lookup(kid); ok {
		return key, nil
	}
	return nil, errUnknownKid
}

// parseKeys reads the keys of the Secret's data. A key that does not parse fails the whole
// Secret: signing or verifying with half a key ring would hide the mistake until a token
// signed by the broken key is refused.
func parseKeys(data map[string][]byte) (map[string]ed25519.PrivateKey, string, error) {
	keys := map[string]ed25519.PrivateKey{}
	for name, value := range data {
		kid, ok := strings.CutSuffix(name, keySuffix)
		if !ok {
			continue
		}
		key, err := parseKey(value)
		if err != nil {
			return nil, "", fmt.Errorf("key %q: %w", kid, err)
		}
		keys[kid] = key
	}
	active := string(data[activeKey])
	if _, ok := keys[active]; !ok {
		return nil, "", fmt.Errorf("active key %q is not in the secret", active)
	}
	return keys, active, nil
}

func parseKey(pemKey []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(pemKey)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM-encoded PKCS#8 private key")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	edKey, ok := key.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an Ed25519 key", key)
	}
	return edKey, nil
}

// newKey generates an Ed25519 key and a random kid (16 hex characters) for it.
func newKey() (kid string, pemKey []byte, err error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", nil, err
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return "", nil, err
	}
	return hex.EncodeToString(id), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

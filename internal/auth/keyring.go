package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/keyring"
)

// The key ring's Secret lives in the manager's own namespace, the only one where the manager
// may get, create and update Secrets (a Role, which kustomize moves to the namespace it
// deploys to).
// +kubebuilder:rbac:groups="",namespace=flexsite-system,resources=secrets,verbs=get;create;update

// signingKeys is what the token signing keys are: PEM-encoded PKCS#8 Ed25519 private keys.
var signingKeys = keyring.Kind[ed25519.PrivateKey]{What: "token signing", Parse: parseKey, New: newPEMKey}

// KeyRing holds Ed25519 signing keys with key ids (kid) for rotation, an internal/keyring ring:
// data entries "<kid>.key" (a PEM-encoded PKCS#8 Ed25519 private key) and "active" (the kid
// that signs new tokens). A key keeps verifying until it is removed from the Secret, so a
// rotation is: add a key, switch "active", remove the old key once its tokens have expired
// (OrganisationTokenTTL / EndUserTokenTTL later).
//
// A KeyRing is safe for concurrent use.
type KeyRing struct {
	ring *keyring.Ring[ed25519.PrivateKey]
}

// NewKeyRing returns a key ring kept in the Secret namespace/name. reader must read from the
// API server (a manager's APIReader): the manager's cache holds credential Secrets only, and
// a rotation must be seen as soon as it happened. The ring is empty until Ensure.
func NewKeyRing(reader client.Reader, writer client.Client, namespace, name string) *KeyRing {
	return &KeyRing{ring: keyring.New(reader, writer, namespace, name, signingKeys)}
}

// Ensure loads the keys, creating the Secret with one fresh key if it does not exist yet
// (keyring.Ring.Ensure: with several replicas starting at once, all share one key).
func (k *KeyRing) Ensure(ctx context.Context) error { return k.ring.Ensure(ctx) }

// Reload re-reads the Secret, picking up added, removed and newly active keys. On error the
// ring keeps the keys it had.
func (k *KeyRing) Reload(ctx context.Context) error { return k.ring.Reload(ctx) }

// signingKey returns the active key and its kid.
func (k *KeyRing) signingKey() (string, ed25519.PrivateKey, error) { return k.ring.Active() }

// has tells whether kid is still in the ring (a removed key's tokens stop verifying at once),
// without deriving its public key.
func (k *KeyRing) has(kid string) bool {
	_, ok := k.ring.Get(kid)
	return ok
}

// verificationKey returns the public key of kid. An unknown kid may be a key another replica
// just rotated in, so it triggers a reload, at most one per keyring.ReloadInterval (measured with
// now) however many such tokens arrive (keyring.Ring.Find).
func (k *KeyRing) verificationKey(ctx context.Context, kid string, now time.Time) (ed25519.PublicKey, error) {
	key, err := k.ring.Find(ctx, kid, now)
	if err != nil {
		return nil, err
	}
	return key.Public().(ed25519.PublicKey), nil
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

// newPEMKey is a fresh Ed25519 key, PEM-encoded PKCS#8.
func newPEMKey() ([]byte, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

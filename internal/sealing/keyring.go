// Package sealing keeps the AES-256-GCM keys Flexsite seals small secrets with, in a Secret
// of the manager's namespace, with key ids so that keys can rotate: the bank details kept in
// the database (internal/pagestore) and the meter references a search answers
// (internal/app/meters) each have a key Secret of their own.
package sealing

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/keyring"
)

const (
	// keySize is AES-256's.
	keySize = 32
	// NonceSize is the nonce of every sealed value (cipher.NewGCM's standard 96 bits).
	NonceSize = 12
)

// The key Secrets live in the manager's own namespace (the Role there).
// +kubebuilder:rbac:groups="",namespace=flexsite-system,resources=secrets,verbs=get;create;update

// KeyRing holds the AES-256 keys that seal one kind of secret, with key ids for rotation, an
// internal/keyring ring: ONE Secret of the manager's namespace, entries "<key id>.key" (32
// random bytes) and "active" (the key id new writes use). A rotation is: add a key, point
// "active" at it (every replica reloads within keyring.ReloadInterval of meeting a value
// sealed with it, and on restart), and remove the old key only once nothing names it
// (docs/operations.md). Keys whose sealed values expire (the meter references) rotate so by
// themselves: Rotation, Rotator. Safe for concurrent use; empty until loaded, which the first
// use does when Ensure was not called.
type KeyRing struct {
	ring *keyring.Ring[cipher.AEAD]
	// what the keys seal, as errors name it ("bank details").
	what string
	// Now is the clock of reloads (nil: time.Now).
	Now func() time.Time
}

// NewKeyRing returns the key ring kept in the Secret namespace/name, of the keys that seal
// what (errors name it). reader must read from the API server (the manager's cache holds no
// Secrets); a ring with a nil reader is filled only by Load.
func NewKeyRing(reader client.Reader, writer client.Client, namespace, name, what string) *KeyRing {
	kind := keyring.Kind[cipher.AEAD]{What: what, Parse: parseKey, New: newKey}
	return &KeyRing{ring: keyring.New(reader, writer, namespace, name, kind), what: what}
}

// Ensure loads the keys, creating the Secret with one fresh key if it does not exist yet.
// Replicas starting at once: one Create wins, the others load the winner's key.
func (k *KeyRing) Ensure(ctx context.Context) error { return k.ring.Ensure(ctx) }

// Reload re-reads the Secret. On error the ring keeps what it had.
func (k *KeyRing) Reload(ctx context.Context) error { return k.ring.Reload(ctx) }

// Load replaces the ring's keys with those of a key Secret's data (Reload's; a ring made
// without a reader, a test's, is loaded only so). On error the ring keeps what it had.
func (k *KeyRing) Load(data map[string][]byte) error { return k.ring.Load(data) }

// Held is the ids of the ring's keys.
func (k *KeyRing) Held() []string { return k.ring.Held() }

// NewKey is a fresh random key and its id (an operator's rotation, Rotation's).
func NewKey() (kid string, key []byte, err error) {
	if kid, err = keyring.NewID(); err != nil {
		return "", nil, err
	}
	key, err = newKey()
	return kid, key, err
}

func newKey() ([]byte, error) {
	key := make([]byte, keySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	return key, nil
}

// parseKey reads a "<key id>.key" entry: 32 bytes.
func parseKey(value []byte) (cipher.AEAD, error) {
	if len(value) != keySize {
		return nil, fmt.Errorf("not a %d-byte key", keySize)
	}
	block, err := aes.NewCipher(value)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// ParseKeys reads a key Secret's data: every "<kid>.key" entry must be 32 bytes, and "active"
// must name one of them.
func ParseKeys(data map[string][]byte) (map[string]cipher.AEAD, string, error) {
	return keyring.Parse(data, parseKey)
}

func (k *KeyRing) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// Active is the active key and its id, loading the ring first if it is empty.
func (k *KeyRing) Active(ctx context.Context) (string, cipher.AEAD, error) {
	if kid, aead, err := k.ring.Active(); err == nil || k.ring.Loaded() {
		return kid, aead, err
	}
	if err := k.ring.Ensure(ctx); err != nil {
		return "", nil, err
	}
	return k.ring.Active()
}

// Seal encrypts plaintext under the active key, binding it to aad: key id, nonce, ciphertext.
func (k *KeyRing) Seal(ctx context.Context, plaintext, aad []byte) (string, []byte, []byte, error) {
	kid, aead, err := k.Active(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", nil, nil, err
	}
	return kid, nonce, aead.Seal(nil, nonce, plaintext, aad), nil
}

// Open decrypts what Seal made (with the same aad).
func (k *KeyRing) Open(ctx context.Context, kid string, nonce, ciphertext, aad []byte) ([]byte, error) {
	aead, err := k.ring.Find(ctx, kid, k.now())
	if err != nil {
		return nil, err
	}
	if len(nonce) != aead.NonceSize() {
		return nil, fmt.Errorf("%s: bad nonce", k.what)
	}
	plaintext, err := aead.Open(nil, nonce, ciphertext, aad)
	if err != nil {
		return nil, fmt.Errorf("%s: the ciphertext does not open (changed, moved, or another key's)", k.what)
	}
	return plaintext, nil
}

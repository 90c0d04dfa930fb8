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
	"encoding/hex"
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
	// ActiveEntry is the key Secret's data entry that names the key id new writes seal with.
	ActiveEntry = "active"
	// KeySuffix ends every data entry that holds a key: "<key id>.key", 32 bytes (AES-256).
	KeySuffix = ".key"
	// keySize is AES-256's.
	keySize = 32
	// NonceSize is the nonce of every sealed value (cipher.NewGCM's standard 96 bits).
	NonceSize = 12
	// reloadInterval bounds how often a row sealed with an unknown key id may make the ring
	// re-read its Secret (a key another replica was told of first).
	reloadInterval = 10 * time.Second
)

// ErrUnknownKey is something sealed with a key id the key Secret no longer holds.
var ErrUnknownKey = errors.New("sealed with a key that is not in the key Secret")

// The key Secrets live in the manager's own namespace (the Role there).
// +kubebuilder:rbac:groups="",namespace=flexsite-system,resources=secrets,verbs=get;create;update

// KeyRing holds the AES-256 keys that seal one kind of secret, with key ids for rotation. They live
// in ONE Secret of the manager's namespace: entries "<key id>.key" (32 random bytes) and
// "active" (the key id new writes use). A rotation is: add a key, point "active" at it (every
// replica reloads within reloadInterval of meeting a row sealed with it, and on restart), and
// remove the old key only once no row names it (docs/operations.md). Keys whose sealed values
// expire (the meter references) rotate so by themselves: Rotation, Rotator. Safe for
// concurrent use; empty until loaded, which the first use does when Ensure was not called.
type KeyRing struct {
	reader client.Reader
	writer client.Client
	key    client.ObjectKey
	// what the keys seal, as errors name it ("bank details").
	what string
	// Now is the clock of reloads (nil: time.Now).
	Now func() time.Time

	mu     sync.RWMutex
	aeads  map[string]cipher.AEAD // replaced as a whole, never modified
	active string

	reloadMu   sync.Mutex
	lastReload time.Time
}

// NewKeyRing returns the key ring kept in the Secret namespace/name, of the keys that seal
// what (errors name it). reader must read from the API server (the manager's cache holds no
// Secrets).
func NewKeyRing(reader client.Reader, writer client.Client, namespace, name, what string) *KeyRing {
	return &KeyRing{reader: reader, writer: writer, key: client.ObjectKey{Namespace: namespace, Name: name}, what: what}
}

// Ensure loads the keys, creating the Secret with one fresh key if it does not exist yet.
// Replicas starting at once: one Create wins, the others load the winner's key.
func (k *KeyRing) Ensure(ctx context.Context) error {
	err := k.Reload(ctx)
	if !apierrors.IsNotFound(err) {
		return err
	}
	kid, key, err := NewKey()
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: k.key.Namespace, Name: k.key.Name},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{kid + KeySuffix: key, ActiveEntry: []byte(kid)},
	}
	if err := k.writer.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the %s key Secret %s: %w", k.what, k.key, err)
	}
	return k.Reload(ctx)
}

// NewKey is a fresh random key and its id (for Ensure and for an operator's rotation).
func NewKey() (kid string, key []byte, err error) {
	key = make([]byte, keySize)
	id := make([]byte, 8)
	if _, err := rand.Read(key); err != nil {
		return "", nil, err
	}
	if _, err := rand.Read(id); err != nil {
		return "", nil, err
	}
	return hex.EncodeToString(id), key, nil
}

// Reload re-reads the Secret. On error the ring keeps what it had; a NotFound is returned
// unwrapped (Ensure tells it).
func (k *KeyRing) Reload(ctx context.Context) error {
	secret := &corev1.Secret{}
	if err := k.reader.Get(ctx, k.key, secret); err != nil {
		return err
	}
	if err := k.Load(secret.Data); err != nil {
		return fmt.Errorf("%s key Secret %s: %w", k.what, k.key, err)
	}
	return nil
}

// Load replaces the ring's keys with those of a key Secret's data (Reload's; a ring made
// without a reader, a test's, is loaded only so). On error the ring keeps what it had.
func (k *KeyRing) Load(data map[string][]byte) error {
	aeads, active, err := ParseKeys(data)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.aeads, k.active = aeads, active
	k.mu.Unlock()
	return nil
}

// ParseKeys reads a key Secret's data: every "<kid>.key" entry must be 32 bytes, and "active"
// must name one of them.
func ParseKeys(data map[string][]byte) (map[string]cipher.AEAD, string, error) {
	aeads := map[string]cipher.AEAD{}
	for name, value := range data {
		kid, ok := strings.CutSuffix(name, KeySuffix)
		if !ok {
			continue
		}
		if kid == "" || len(value) != keySize {
			return nil, "", fmt.Errorf("entry %q is not a %d-byte key with an id", name, keySize)
		}
		block, err := aes.NewCipher(value)
		if err != nil {
			return nil, "", err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, "", err
		}
		aeads[kid] = aead
	}
	active := strings.TrimSpace(string(data[ActiveEntry]))
	if _, ok := aeads[active]; !ok {
		return nil, "", fmt.Errorf("%q names no key of the Secret (%q)", ActiveEntry, active)
	}
	return aeads, active, nil
}

func (k *KeyRing) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// Active is the active key and its id, loading the ring first if it is empty.
func (k *KeyRing) Active(ctx context.Context) (string, cipher.AEAD, error) {
	k.mu.RLock()
	kid, aead := k.active, k.aeads[k.active]
	k.mu.RUnlock()
	if aead != nil {
		return kid, aead, nil
	}
	if k.reader == nil {
		return "", nil, fmt.Errorf("%s key ring not loaded", k.what)
	}
	if err := k.Ensure(ctx); err != nil {
		return "", nil, err
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.active, k.aeads[k.active], nil
}

// opening is the key kid. An unknown id may be a key added a moment ago: it reloads the ring,
// at most once per reloadInterval.
func (k *KeyRing) opening(ctx context.Context, kid string) (cipher.AEAD, error) {
	k.mu.RLock()
	aead, loaded := k.aeads[kid], k.aeads != nil
	k.mu.RUnlock()
	if aead != nil {
		return aead, nil
	}
	k.reloadMu.Lock()
	defer k.reloadMu.Unlock()
	if (loaded && k.now().Sub(k.lastReload) < reloadInterval) || k.reader == nil {
		return nil, fmt.Errorf("%s %w (%s)", k.what, ErrUnknownKey, kid)
	}
	k.lastReload = k.now()
	var err error
	if loaded {
		err = k.Reload(ctx)
	} else {
		err = k.Ensure(ctx)
	}
	if err != nil {
		return nil, err
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	if aead = k.aeads[kid]; aead == nil {
		return nil, fmt.Errorf("%s %w (%s)", k.what, ErrUnknownKey, kid)
	}
	return aead, nil
}

// Held is the ids of the ring's keys.
func (k *KeyRing) Held() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	ids := make([]string, 0, len(k.aeads))
	for kid := range k.aeads {
		ids = append(ids, kid)
	}
	return ids
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
	aead, err := k.opening(ctx, kid)
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

// Package keyring keeps keys with key ids, for rotation, in one Secret of the manager's
// namespace: entries "<key id>.key" (a key, in the form its Kind parses) and "active" (the id
// of the key new work uses). internal/auth keeps its token signing keys in one
// (Ed25519), internal/sealing its sealing keys (AES-256-GCM); the rules of the Secret and of
// reloading it are here once.
package keyring

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// ActiveEntry is the key Secret's data entry that names the key id new work uses.
	ActiveEntry = "active"
	// KeySuffix ends every data entry that holds a key: "<key id>.key".
	KeySuffix = ".key"
	// ReloadInterval bounds how often an unknown key id may make a ring re-read its Secret:
	// anyone can send a token with a made-up key id, and each reload is an API call.
	ReloadInterval = 10 * time.Second
)

// ErrUnknownKey is a key id the ring does not hold, after the reload it was allowed.
var ErrUnknownKey = errors.New("unknown key id")

// Kind is what a ring's keys are.
type Kind[K any] struct {
	// What the keys are, as errors name it ("token signing", "bank details").
	What string
	// Parse reads one "<key id>.key" entry.
	Parse func(value []byte) (K, error)
	// New is a fresh key, as Parse reads it (Ensure's first key).
	New func() ([]byte, error)
}

// Ring holds the keys of one Secret. Safe for concurrent use; empty until loaded.
type Ring[K any] struct {
	reader client.Reader
	writer client.Client
	key    client.ObjectKey
	kind   Kind[K]

	mu     sync.RWMutex
	keys   map[string]K // replaced as a whole, never modified
	active string

	reloadMu   sync.Mutex // serialises the reloads an unknown key id makes
	lastReload time.Time  // of the last reload an unknown key id made
}

// New returns the ring kept in the Secret namespace/name. reader must read from the API server
// (a manager's APIReader: the manager's cache holds no key Secret, and a rotation must be seen
// as soon as it happened). A ring with a nil reader has no Secret: only Load fills it (tests).
func New[K any](reader client.Reader, writer client.Client, namespace, name string, kind Kind[K]) *Ring[K] {
	return &Ring[K]{reader: reader, writer: writer, key: client.ObjectKey{Namespace: namespace, Name: name}, kind: kind}
}

// Secret is the name of the ring's Secret.
func (r *Ring[K]) Secret() client.ObjectKey { return r.key }

// NewID is a fresh random key id (16 hex characters).
func NewID() (string, error) {
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return "", err
	}
	return hex.EncodeToString(id), nil
}

// Ensure loads the keys, creating the Secret with one fresh key if it does not exist yet.
// Replicas starting at once: exactly one Create wins, the others get AlreadyExists and load
// the winner's key, so all of them share one key.
func (r *Ring[K]) Ensure(ctx context.Context) error {
	if r.reader == nil {
		return fmt.Errorf("%s key ring: no Secret to load", r.kind.What)
	}
	err := r.Reload(ctx)
	if !apierrors.IsNotFound(err) {
		return err
	}
	kid, err := NewID()
	if err != nil {
		return err
	}
	value, err := r.kind.New()
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.key.Namespace, Name: r.key.Name},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{kid + KeySuffix: value, ActiveEntry: []byte(kid)},
	}
	if err := r.writer.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the %s key Secret %s: %w", r.kind.What, r.key, err)
	}
	return r.Reload(ctx)
}

// Reload re-reads the Secret, picking up added, removed and newly active keys. On error the
// ring keeps what it had; a NotFound is returned unwrapped (Ensure tells it).
func (r *Ring[K]) Reload(ctx context.Context) error {
	secret := &corev1.Secret{}
	if err := r.reader.Get(ctx, r.key, secret); err != nil {
		return err
	}
	if err := r.Load(secret.Data); err != nil {
		return fmt.Errorf("%s key Secret %s: %w", r.kind.What, r.key, err)
	}
	return nil
}

// Load replaces the ring's keys with those of a key Secret's data. On error the ring keeps
// what it had.
func (r *Ring[K]) Load(data map[string][]byte) error {
	keys, active, err := Parse(data, r.kind.Parse)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.keys, r.active = keys, active
	r.mu.Unlock()
	return nil
}

// Parse reads a key Secret's data: every "<key id>.key" entry must have an id and parse, and
// "active" (spaces around it ignored) must name one of them. A key that does not parse fails
// the whole Secret: working with half a ring would hide the mistake until something of the
// broken key is refused.
func Parse[K any](data map[string][]byte, parse func([]byte) (K, error)) (map[string]K, string, error) {
	keys := map[string]K{}
	for name, value := range data {
		kid, ok := strings.CutSuffix(name, KeySuffix)
		if !ok {
			continue
		}
		if kid == "" {
			return nil, "", fmt.Errorf("entry %q has no key id", name)
		}
		key, err := parse(value)
		if err != nil {
			return nil, "", fmt.Errorf("key %q: %w", kid, err)
		}
		keys[kid] = key
	}
	active := strings.TrimSpace(string(data[ActiveEntry]))
	if _, ok := keys[active]; !ok {
		return nil, "", fmt.Errorf("%q names no key of the Secret (%q)", ActiveEntry, active)
	}
	return keys, active, nil
}

// Loaded reports whether the ring holds keys.
func (r *Ring[K]) Loaded() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.keys != nil
}

// Active is the active key and its id; an error when the ring is not loaded.
func (r *Ring[K]) Active() (string, K, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	key, ok := r.keys[r.active]
	if !ok {
		var zero K
		return "", zero, fmt.Errorf("%s key ring not loaded", r.kind.What)
	}
	return r.active, key, nil
}

// Get is the key kid, if the ring holds it now (no reload).
func (r *Ring[K]) Get(kid string) (K, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	key, ok := r.keys[kid]
	return key, ok
}

// Held is the ids of the ring's keys, sorted.
func (r *Ring[K]) Held() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ids := make([]string, 0, len(r.keys))
	for kid := range r.keys {
		ids = append(ids, kid)
	}
	slices.Sort(ids)
	return ids
}

// Find is the key kid. An unknown id may be a key another replica rotated in a moment ago, so
// it re-reads the Secret (loads it, or creates it, when the ring was never loaded), at most
// once per ReloadInterval (measured with now) however many unknown ids arrive: a caller that
// waited for another's reload looks again before it counts as one. The answer is the key,
// ErrUnknownKey (wrapped), or the error of the reload it made (the Secret unreadable is not
// an unknown key).
func (r *Ring[K]) Find(ctx context.Context, kid string, now time.Time) (K, error) {
	var zero K
	if key, ok := r.Get(kid); ok {
		return key, nil
	}
	unknown := fmt.Errorf("%s key %w (%q)", r.kind.What, ErrUnknownKey, kid)
	if r.reader == nil {
		return zero, unknown
	}
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	// Another caller may have reloaded while this one waited for the lock.
	if key, ok := r.Get(kid); ok {
		return key, nil
	}
	loaded := r.Loaded()
	if !r.lastReload.IsZero() && now.Sub(r.lastReload) < ReloadInterval {
		if !loaded {
			return zero, fmt.Errorf("%s key ring not loaded", r.kind.What)
		}
		return zero, unknown
	}
	r.lastReload = now
	var err error
	if loaded {
		err = r.Reload(ctx)
	} else {
		err = r.Ensure(ctx)
	}
	if err != nil {
		return zero, fmt.Errorf("%s key %q not held, and the key Secret does not load: %w", r.kind.What, kid, err)
	}
	if key, ok := r.Get(kid); ok {
		return key, nil
	}
	return zero, unknown
}

// Edit re-reads the Secret, writes edit's change of its data (when it says changed), and loads
// the result. Every replica may call it at once: the write carries the Secret's
// resourceVersion, so one writes and the others, refused with a conflict, load what it wrote.
func (r *Ring[K]) Edit(ctx context.Context, edit func(data map[string][]byte) (map[string][]byte, bool, error)) error {
	if r.reader == nil || r.writer == nil {
		return fmt.Errorf("%s key ring: no Secret to edit", r.kind.What)
	}
	secret := &corev1.Secret{}
	if err := r.reader.Get(ctx, r.key, secret); err != nil {
		return fmt.Errorf("reading the %s key Secret %s: %w", r.kind.What, r.key, err)
	}
	data, changed, err := edit(secret.Data)
	if err != nil {
		return fmt.Errorf("%s key Secret %s: %w", r.kind.What, r.key, err)
	}
	if changed {
		secret.Data = data
		if err := r.writer.Update(ctx, secret); apierrors.IsConflict(err) {
			return r.Reload(ctx) // another replica wrote first
		} else if err != nil {
			return fmt.Errorf("writing the %s key Secret %s: %w", r.kind.What, r.key, err)
		}
	}
	return r.Load(data)
}

package sealing_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/keyring"
	"github.com/flexsite/flexsite/internal/sealing"
)

var rotation = sealing.Rotation{Every: 24 * time.Hour, Keep: 70 * time.Minute}

// keyIDs is the ids of the keys a key Secret's data holds, sorted.
func keyIDs(data map[string][]byte) []string {
	var ids []string
	for name := range data {
		if kid, ok := strings.CutSuffix(name, keyring.KeySuffix); ok {
			ids = append(ids, kid)
		}
	}
	slices.Sort(ids)
	return ids
}

// The rotation's steps on a Secret's data: the active key's clock started, a new key every
// Every (the old one retired then), a retired key removed Keep after, nothing changed between.
func TestRotatedRotatesThenRemovesTheRetiredKey(t *testing.T) {
	kid, key, err := sealing.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	data := map[string][]byte{kid + keyring.KeySuffix: key, keyring.ActiveEntry: []byte(kid)}

	started, changed, err := rotation.Rotated(data, t0)
	if err != nil || !changed || string(started[kid+sealing.ActivatedSuffix]) != "2026-11-29T06:00:00Z" {
		t.Fatalf("first pass: %v, changed %v, activated %q", err, changed, started[kid+sealing.ActivatedSuffix])
	}
	if _, ok := data[kid+sealing.ActivatedSuffix]; ok {
		t.Fatal("Rotated modified its input")
	}
	if _, changed, _ := rotation.Rotated(started, t0.Add(rotation.Every-time.Second)); changed {
		t.Fatal("rotated before Every")
	}
	rotated, changed, err := rotation.Rotated(started, t0.Add(rotation.Every))
	if err != nil || !changed {
		t.Fatalf("at Every: %v, changed %v", err, changed)
	}
	next := string(rotated[keyring.ActiveEntry])
	if next == kid || !slices.Equal(keyIDs(rotated), sortedIDs(kid, next)) ||
		string(rotated[kid+sealing.RetiredSuffix]) != "2026-11-30T06:00:00Z" {
		t.Fatalf("at Every: active %q, keys %v, old retired %q", next, keyIDs(rotated), rotated[kid+sealing.RetiredSuffix])
	}
	if _, changed, _ := rotation.Rotated(rotated, t0.Add(rotation.Every+rotation.Keep-time.Second)); changed {
		t.Fatal("removed the retired key before Keep")
	}
	dropped, changed, err := rotation.Rotated(rotated, t0.Add(rotation.Every+rotation.Keep))
	if err != nil || !changed || !slices.Equal(keyIDs(dropped), []string{next}) {
		t.Fatalf("at Keep: %v, changed %v, keys %v", err, changed, keyIDs(dropped))
	}
	for name := range dropped {
		if strings.HasPrefix(name, kid+".") {
			t.Errorf("entry %q of the removed key is left", name)
		}
	}

	// A key an operator retired by hand (no retirement time) is kept Keep from when the
	// rotation first sees it.
	byHand := map[string][]byte{keyring.ActiveEntry: []byte(next), next + keyring.KeySuffix: dropped[next+keyring.KeySuffix],
		next + sealing.ActivatedSuffix: dropped[next+sealing.ActivatedSuffix], kid + keyring.KeySuffix: key}
	seen, _, err := rotation.Rotated(byHand, t0.Add(rotation.Every+time.Hour))
	if err != nil || string(seen[kid+sealing.RetiredSuffix]) != "2026-11-30T07:00:00Z" {
		t.Fatalf("a key retired by hand: %v, retired %q", err, seen[kid+sealing.RetiredSuffix])
	}
	if _, _, err := rotation.Rotated(map[string][]byte{kid + keyring.KeySuffix: key, keyring.ActiveEntry: []byte(kid),
		kid + sealing.ActivatedSuffix: []byte("yesterday")}, t0); err == nil {
		t.Error("accepted an activation time that is not one")
	}
}

func sortedIDs(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

// Two replicas on one key Secret: they rotate at once and end on the same new key (one wrote,
// the other loaded it); what the old key sealed still opens on both until Keep after the
// rotation, then it is refused as sealed with an unknown key.
func TestRotateAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	replicas := []*sealing.KeyRing{
		sealing.NewKeyRing(env.Client, env.Client, ns, "meter-ref-keys", "meter references"),
		sealing.NewKeyRing(env.Client, env.Client, ns, "meter-ref-keys", "meter references"),
	}
	for _, r := range replicas {
		if err := r.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	for _, r := range replicas {
		if err := r.Rotate(ctx, rotation, t0); err != nil {
			t.Fatal(err)
		}
	}
	oldKid, nonce, sealed, err := replicas[0].Seal(ctx, []byte("mpan"), []byte("org"))
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make([]error, len(replicas))
	for i, r := range replicas {
		wg.Go(func() { errs[i] = r.Rotate(ctx, rotation, t0.Add(rotation.Every)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "meter-ref-keys"}, secret); err != nil {
		t.Fatal(err)
	}
	if ids := keyIDs(secret.Data); len(ids) != 2 {
		t.Fatalf("keys %v after two replicas rotated at once; want the old and one new", ids)
	}
	newKid := string(secret.Data[keyring.ActiveEntry])
	for i, r := range replicas {
		kid, _, _, err := r.Seal(ctx, []byte("x"), nil)
		if err != nil || kid != newKid || kid == oldKid {
			t.Errorf("replica %d seals with %q (%v); want the new key %q", i, kid, err, newKid)
		}
		if got, err := r.Open(ctx, oldKid, nonce, sealed, []byte("org")); err != nil || string(got) != "mpan" {
			t.Errorf("replica %d, after the rotation: the old key's value opens as %q, %v", i, got, err)
		}
	}

	for _, r := range replicas {
		if err := r.Rotate(ctx, rotation, t0.Add(rotation.Every+rotation.Keep)); err != nil {
			t.Fatal(err)
		}
	}
	for i, r := range replicas {
		if _, err := r.Open(ctx, oldKid, nonce, sealed, []byte("org")); !errors.Is(err, keyring.ErrUnknownKey) {
			t.Errorf("replica %d, Keep after the rotation: the old key's value: %v; want ErrUnknownKey", i, err)
		}
		if held := r.Held(); !slices.Equal(held, []string{newKid}) {
			t.Errorf("replica %d holds %v; want only %q", i, held, newKid)
		}
	}
}

// The Rotator rotates a running ring, without a restart, on the clock it is given.
func TestRotatorRotatesWithoutRestart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := newNamespace(t)
	ring := sealing.NewKeyRing(env.Client, env.Client, ns, "meter-ref-keys", "meter references")
	if err := ring.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	first, _, _, err := ring.Seal(ctx, []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Now()
	if err := ring.Rotate(ctx, rotation, now); err != nil { // the active key's clock starts now
		t.Fatal(err)
	}
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	failures := make(chan error, 100)
	rt := &sealing.Rotator{Ring: ring, Now: clock, Failed: func(err error) { failures <- err },
		Rotation: sealing.Rotation{Every: rotation.Every, Keep: rotation.Keep, CheckEvery: 20 * time.Millisecond}}
	done := make(chan error, 1)
	go func() { done <- rt.Start(ctx) }()

	mu.Lock()
	now = now.Add(rotation.Every + time.Minute)
	mu.Unlock()
	deadline := time.After(20 * time.Second)
	for {
		kid, _, _, err := ring.Seal(ctx, []byte("x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if kid != first {
			break
		}
		select {
		case err := <-failures:
			t.Fatalf("a rotation pass failed: %v", err)
		case <-deadline:
			t.Fatal("the running ring did not rotate")
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

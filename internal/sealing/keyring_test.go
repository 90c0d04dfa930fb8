package sealing_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/flexsite/flexsite/internal/keyring"
	"github.com/flexsite/flexsite/internal/sealing"
)

// ring is a key ring loaded with the given key ids, the last active (no Secret behind it).
func ring(t *testing.T, keys map[string][]byte, active string) *sealing.KeyRing {
	t.Helper()
	data := map[string][]byte{keyring.ActiveEntry: []byte(active)}
	for kid, key := range keys {
		data[kid+keyring.KeySuffix] = key
	}
	r := sealing.NewKeyRing(nil, nil, "", "", "test secrets")
	if err := r.Load(data); err != nil {
		t.Fatal(err)
	}
	return r
}

func newKey(t *testing.T) []byte {
	t.Helper()
	_, key, err := sealing.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestSealOpensOnlyWithItsKeyAndData(t *testing.T) {
	ctx := context.Background()
	old, fresh := newKey(t), newKey(t)
	before := ring(t, map[string][]byte{"old": old}, "old")
	kid, nonce, ct, err := before.Seal(ctx, []byte("secret"), []byte("organisation-a"))
	if err != nil || kid != "old" || len(nonce) != sealing.NonceSize {
		t.Fatalf("Seal = %q, %d-byte nonce, %v", kid, len(nonce), err)
	}
	if got, err := before.Open(ctx, kid, nonce, ct, []byte("organisation-a")); err != nil || !bytes.Equal(got, []byte("secret")) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := before.Open(ctx, kid, nonce, ct, []byte("organisation-b")); err == nil {
		t.Fatal("opened with another organisation's additional data")
	}
	tampered := bytes.Clone(ct)
	tampered[0] ^= 1
	if _, err := before.Open(ctx, kid, nonce, tampered, []byte("organisation-a")); err == nil {
		t.Fatal("opened a changed ciphertext")
	}

	// A rotation: the new key seals, the old one still opens what it sealed until removed.
	rotated := ring(t, map[string][]byte{"old": old, "new": fresh}, "new")
	if got, err := rotated.Open(ctx, kid, nonce, ct, []byte("organisation-a")); err != nil || string(got) != "secret" {
		t.Fatalf("after rotation Open = %q, %v", got, err)
	}
	if kid, _, _, _ := rotated.Seal(ctx, []byte("x"), nil); kid != "new" {
		t.Fatalf("after rotation Seal used %q", kid)
	}
	removed := ring(t, map[string][]byte{"new": fresh}, "new")
	if _, err := removed.Open(ctx, "old", nonce, ct, []byte("organisation-a")); !errors.Is(err, keyring.ErrUnknownKey) {
		t.Fatalf("a removed key's value: %v, want ErrUnknownKey", err)
	}
}

func TestParseKeysRefusesWhatIsNotAKeySecret(t *testing.T) {
	key := newKey(t)
	for name, data := range map[string]map[string][]byte{
		"active names no key": {"a.key": key, "active": []byte("b")},
		"a short key":         {"a.key": key[:16], "active": []byte("a")},
		"a key without an id": {".key": key, "active": []byte("")},
	} {
		if _, _, err := sealing.ParseKeys(data); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

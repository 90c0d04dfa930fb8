package auth

import (
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flexsite/flexsite/internal/keyring"
	"github.com/flexsite/flexsite/internal/testenv"
)

// secretKeys returns the kids of the ring's Secret and its active kid.
func secretKeys(t *testing.T, ring *KeyRing) (kids []string, active string) {
	t.Helper()
	secret := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), ring.ring.Secret(), secret); err != nil {
		t.Fatal(err)
	}
	for name := range secret.Data {
		if kid, ok := strings.CutSuffix(name, keyring.KeySuffix); ok {
			kids = append(kids, kid)
		}
	}
	return kids, string(secret.Data[keyring.ActiveEntry])
}

// editSecret changes the ring's Secret the way an operator would with kubectl.
func editSecret(t *testing.T, ring *KeyRing, edit func(data map[string][]byte)) {
	t.Helper()
	secret := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), ring.ring.Secret(), secret); err != nil {
		t.Fatal(err)
	}
	edit(secret.Data)
	if err := env.Client.Update(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
}

func TestKeyRingEnsureCreatesOneKey(t *testing.T) {
	ns := newNamespace(t)

	// Replicas starting together: exactly one Create wins, and all of them load its key.
	const replicas = 5
	rings := make([]*KeyRing, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range rings {
		rings[i] = NewKeyRing(env.Client, env.Client, ns, "signing-keys")
		wg.Go(func() { errs[i] = rings[i].Ensure(t.Context()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	kids, active := secretKeys(t, rings[0])
	if len(kids) != 1 || kids[0] != active {
		t.Fatalf("secret holds keys %v with active %q, want exactly the active one", kids, active)
	}
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(active) {
		t.Errorf("kid %q is not 16 hex characters", active)
	}
	for i, ring := range rings {
		if kid, _, err := ring.signingKey(); err != nil || kid != active {
			t.Errorf("replica %d signs with %q (%v), want %q", i, kid, err, active)
		}
	}

	// A token one replica issued verifies on another.
	token, _, err := NewIssuer(rings[0], time.Now).IssueOrganisationToken(orgPrincipal())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewIssuer(rings[replicas-1], time.Now).Verify(t.Context(), token); err != nil {
		t.Error(err)
	}

	// Ensure again (a restart) keeps the key.
	if err := rings[0].Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	if kids, _ := secretKeys(t, rings[0]); len(kids) != 1 || kids[0] != active {
		t.Errorf("after a second Ensure the secret holds %v, want [%s]", kids, active)
	}
}

func TestKeyRingRefusesBrokenSecret(t *testing.T) {
	ns := newNamespace(t)
	_, goodKey, err := newKey()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data map[string][]byte
	}{
		{"no keys", map[string][]byte{}},
		{"active key missing", map[string][]byte{"k1.key": goodKey, "active": []byte("k2")}},
		{"key not PEM", map[string][]byte{"k1.key": []byte("garbage"), "active": []byte("k1")}},
		{"one good, one broken key", map[string][]byte{"k1.key": goodKey, "k2.key": []byte("garbage"), "active": []byte("k1")}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := "keys-" + string(rune('a'+i))
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: tc.data}
			if err := env.Client.Create(t.Context(), secret); err != nil {
				t.Fatal(err)
			}
			if err := NewKeyRing(env.Client, env.Client, ns, name).Ensure(t.Context()); err == nil {
				t.Error("Ensure() accepted a broken secret")
			}
		})
	}
}

func TestKeyRingRotation(t *testing.T) {
	ring := newRing(t)
	clk := &clock{now: time.Now()}
	iss := NewIssuer(ring, clk.Now)
	// A second replica that loaded the keys before the rotation and is never told about it.
	stale := NewKeyRing(env.Client, env.Client, ring.ring.Secret().Namespace, ring.ring.Secret().Name)
	if err := stale.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	staleIss := NewIssuer(stale, clk.Now)

	oldToken, _, err := iss.IssueOrganisationToken(orgPrincipal())
	if err != nil {
		t.Fatal(err)
	}
	oldKid, _, _ := ring.signingKey()

	newKid, newPEM, err := newKey()
	if err != nil {
		t.Fatal(err)
	}
	editSecret(t, ring, func(data map[string][]byte) {
		data[newKid+keyring.KeySuffix] = newPEM
		data[keyring.ActiveEntry] = []byte(newKid)
	})
	if err := ring.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}

	newToken, _, err := iss.IssueOrganisationToken(orgPrincipal())
	if err != nil {
		t.Fatal(err)
	}
	if header, _ := parseUnverified(t, newToken); header["kid"] != newKid {
		t.Errorf("new token has kid %v, want %s", header["kid"], newKid)
	}
	for name, token := range map[string]string{"old token": oldToken, "new token": newToken} {
		if _, err := iss.Verify(t.Context(), token); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		// The stale replica picks the new key up on the first token that needs it.
		if _, err := staleIss.Verify(t.Context(), token); err != nil {
			t.Errorf("%s on a stale replica: %v", name, err)
		}
	}

	// Removing the old key ends its tokens.
	editSecret(t, ring, func(data map[string][]byte) { delete(data, oldKid+keyring.KeySuffix) })
	if err := ring.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	clk.Advance(keyring.ReloadInterval) // let the unknown kid trigger a reload again
	if _, err := iss.Verify(t.Context(), oldToken); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("token of a removed key: Verify() = %v, want ErrInvalidToken", err)
	}
	if _, err := iss.Verify(t.Context(), newToken); err != nil {
		t.Errorf("new token after removing the old key: %v", err)
	}
}

func TestUnknownKidReloadRateLimit(t *testing.T) {
	ns := newNamespace(t)
	reader := &testenv.CountingReader{Reader: env.Client}
	ring := NewKeyRing(reader, env.Client, ns, "signing-keys")
	if err := ring.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: t0}
	iss := NewIssuer(ring, clk.Now)

	// A key that another replica is about to rotate in: the ring does not know it yet.
	newKid, newPEM, err := newKey()
	if err != nil {
		t.Fatal(err)
	}
	newPriv, err := parseKey(newPEM)
	if err != nil {
		t.Fatal(err)
	}
	token := sign(t, jwt.SigningMethodEdDSA, newPriv, newKid, validClaims(t0))

	verify := func() error { _, err := iss.Verify(t.Context(), token); return err }
	reloads := func(f func()) int32 {
		before := reader.Gets()
		f()
		return reader.Gets() - before
	}

	// A flood of tokens with an unknown kid costs one read of the Secret.
	if n := reloads(func() {
		for range 50 {
			if err := verify(); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("Verify(unknown kid) = %v, want ErrInvalidToken", err)
			}
		}
	}); n != 1 {
		t.Errorf("50 unknown-kid tokens caused %d reloads, want 1", n)
	}

	// The key arrives in the Secret; within the interval the ring does not look.
	editSecret(t, ring, func(data map[string][]byte) { data[newKid+keyring.KeySuffix] = newPEM })
	clk.Advance(keyring.ReloadInterval - time.Second)
	if n := reloads(func() {
		if err := verify(); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("Verify() within the reload interval = %v, want ErrInvalidToken", err)
		}
	}); n != 0 {
		t.Errorf("%d reloads within the interval, want 0", n)
	}

	// Once the interval has passed the next unknown kid reloads and the key is found; tokens of
	// that kid need no further reads.
	clk.Advance(time.Second)
	if n := reloads(func() {
		for range 3 {
			if err := verify(); err != nil {
				t.Errorf("Verify() after the interval = %v", err)
			}
		}
	}); n != 1 {
		t.Errorf("%d reloads after the interval, want 1", n)
	}
}

// newKey is a fresh signing key and a kid for it, as an operator's rotation adds one.
func newKey() (kid string, pemKey []byte, err error) {
	if kid, err = keyring.NewID(); err != nil {
		return "", nil, err
	}
	pemKey, err = newPEMKey()
	return kid, pemKey, err
}

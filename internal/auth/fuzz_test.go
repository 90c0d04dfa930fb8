package auth

// Fuzz targets for what the REST API reads off every request before anything else: the
// Authorization header (BearerToken) and the token in it (Issuer.Verify).
//
//	go test -run='^$' -fuzz=FuzzBearerToken -fuzztime=20s ./internal/auth/
//	KUBEBUILDER_ASSETS=$(hack/ensure-k8s-binaries.sh) go test -run='^$' -fuzz=FuzzVerify -fuzztime=20s ./internal/auth/
//
// FuzzVerify needs the key ring's Secret, so an API server (TestMain starts one when
// KUBEBUILDER_ASSETS is set; the target skips without it).

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/keyring"
)

// bearerRE is BearerToken's contract: one "Bearer" (any case), one space, one token without
// blanks.
var bearerRE = regexp.MustCompile(`^(?i:bearer) ([^ \t]+)$`)

func FuzzBearerToken(f *testing.F) {
	for _, h := range []string{
		"Bearer abc.def.ghi", "bearer abc", "BEARER abc", "BeArEr x", "Bearer", "Bearer ", "Bearer  abc",
		"Bearer abc def", "Bearer abc\t", "Bearer\tabc", " Bearer abc", "Basic dXNlcjpwYXNz", "Bearertoken",
		"Bearer abc\r\n", "Bearer \x00", "Bearer ÿ", "Beaｒer abc", "Bearer abc ", "", "Token abc",
	} {
		f.Add(h, false)
	}
	f.Add("Bearer abc", true)
	f.Fuzz(func(t *testing.T, header string, twice bool) {
		r, err := http.NewRequest(http.MethodGet, "http://flexsite.invalid/", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header["Authorization"] = []string{header}
		if twice {
			r.Header["Authorization"] = append(r.Header["Authorization"], header)
		}
		token, ok := BearerToken(r)
		m := bearerRE.FindStringSubmatch(header)
		switch {
		case twice && ok:
			t.Fatalf("two Authorization headers %q: took %q", header, token)
		case twice:
		case ok != (m != nil):
			t.Fatalf("%q: BearerToken ok=%v (token %q), the contract says %v", header, ok, token, m != nil)
		case ok && token != m[1]:
			t.Fatalf("%q: token %q, want %q", header, token, m[1])
		}
		if !ok && token != "" {
			t.Fatalf("%q: refused, yet returned %q", header, token)
		}
	})
}

// The fuzzed issuer's keys are fixed (deterministic Ed25519 seeds) and so is its clock, so
// that a token signed in one run verifies in the next: the regression seeds of testdata stay
// meaningful.
const (
	fuzzActiveKid = "f0220000000000a1"
	fuzzOtherKid  = "f0220000000000b2"
)

var fuzzT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fuzzKey(b byte) ed25519.PrivateKey {
	seed := make([]byte, ed25519.SeedSize)
	for i := range seed {
		seed[i] = b + byte(i)
	}
	return ed25519.NewKeyFromSeed(seed)
}

func fuzzPEM(t testing.TB, key ed25519.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// fuzzSign signs claims as issue does (same header, same claims struct), with the given
// kid and key: the deterministic twin of an issued token.
func fuzzSign(t testing.TB, kid string, key ed25519.PrivateKey, c claims) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	tok.Header["kid"] = kid
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func fuzzOrgClaims() claims {
	return claims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: issuer, Subject: "acme-app", ID: "FUZZJTI1",
			IssuedAt: jwt.NewNumericDate(fuzzT0), ExpiresAt: jwt.NewNumericDate(fuzzT0.Add(OrganisationTokenTTL))},
		Org: "acme", Cli: "acme-app", Usr: "acme-app", Kind: KindOrganisation, Roles: []string{"entity_read", "rewards"},
	}
}

func fuzzEndUserClaims() claims {
	return claims{
		RegisteredClaims: jwt.RegisteredClaims{Issuer: issuer, Subject: "6f1c2d4e-8a7b-4c3d-9e0f-1a2b3c4d5e6f", ID: "FUZZJTI2",
			IssuedAt: jwt.NewNumericDate(fuzzT0), ExpiresAt: jwt.NewNumericDate(fuzzT0.Add(EndUserTokenTTL))},
		Org: "acme", Cli: "acme-app", Usr: "acme-app", Kind: KindEndUser, Site: "site-1200000000011",
		Aor: "https://app.example.com",
	}
}

// canonicalJWT reports whether token is exactly three segments of unpadded base64url, each
// the one encoding of its bytes: no other string carries the same token.
func canonicalJWT(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		b, err := base64.RawURLEncoding.Strict().DecodeString(p)
		if err != nil || base64.RawURLEncoding.EncodeToString(b) != p {
			return false
		}
	}
	return true
}

// fuzzRing loads a key ring from a Secret of a fresh namespace holding the fixed keys.
func fuzzRing(f *testing.F) *KeyRing {
	ctx := context.Background()
	ns, err := env.Namespace(ctx)
	if err != nil {
		f.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fuzz-keys"},
		Data: map[string][]byte{
			fuzzActiveKid + keyring.KeySuffix: fuzzPEM(f, fuzzKey(1)),
			fuzzOtherKid + keyring.KeySuffix:  fuzzPEM(f, fuzzKey(2)),
			keyring.ActiveEntry:               []byte(fuzzActiveKid),
		},
	}
	if err := env.Client.Create(ctx, secret); err != nil {
		f.Fatal(err)
	}
	ring := NewKeyRing(env.Client, env.Client, ns, "fuzz-keys")
	if err := ring.Ensure(ctx); err != nil {
		f.Fatal(err)
	}
	return ring
}

// FuzzVerify feeds arbitrary strings to Issuer.Verify. Invariants: no panic; a refusal is
// an ErrInvalidToken and returns no principal; an accepted string is one the issuer could
// have issued: canonical (the exact string issue produces, not a variant that decodes to
// the same bytes), signed by a key of the ring, and speaking for a valid principal.
func FuzzVerify(f *testing.F) {
	if env == nil {
		f.Skip("KUBEBUILDER_ASSETS is not set: the key ring needs an API server")
	}
	ring := fuzzRing(f)
	iss := NewIssuer(ring, func() time.Time { return fuzzT0 })
	active, other, stranger := fuzzKey(1), fuzzKey(2), fuzzKey(9)

	org, endUser := fuzzOrgClaims(), fuzzEndUserClaims()
	good := fuzzSign(f, fuzzActiveKid, active, org)
	// Tokens the issuer makes must verify, as the principal they were made for.
	for _, issue := range []func() (string, time.Duration, error){
		func() (string, time.Duration, error) {
			return iss.IssueOrganisationToken(Principal{Namespace: "acme", ClientName: "acme-app", Username: "acme-app",
				Roles: []flexv1.Role{flexv1.RoleEntityRead}})
		},
		func() (string, time.Duration, error) {
			return iss.IssueEndUserToken(Principal{Namespace: "acme", ClientName: "acme-app", Username: "acme-app",
				SiteName: "site-1", UserID: "6f1c2d4e-8a7b-4c3d-9e0f-1a2b3c4d5e6f", AllowedOrigin: "https://app.example.com"})
		},
	} {
		tok, _, err := issue()
		if err != nil {
			f.Fatal(err)
		}
		if _, err := iss.Verify(context.Background(), tok); err != nil {
			f.Fatalf("an issued token does not verify: %v", err)
		}
		f.Add(tok)
	}

	edit := func(c claims, change func(*claims)) claims { change(&c); return c }
	seeds := []string{
		good,
		fuzzSign(f, fuzzActiveKid, active, endUser),
		fuzzSign(f, fuzzOtherKid, other, org), // a non-active key of the ring still verifies
		fuzzSign(f, fuzzActiveKid, stranger, org),
		fuzzSign(f, "0000000000000000", stranger, org),
		fuzzSign(f, fuzzActiveKid, active, edit(org, func(c *claims) {
			c.ExpiresAt = jwt.NewNumericDate(fuzzT0.Add(-time.Minute))
		})),
		fuzzSign(f, fuzzActiveKid, active, edit(org, func(c *claims) { c.IssuedAt = jwt.NewNumericDate(fuzzT0.Add(time.Hour)) })),
		fuzzSign(f, fuzzActiveKid, active, edit(org, func(c *claims) { c.ExpiresAt = nil })),
		fuzzSign(f, fuzzActiveKid, active, edit(org, func(c *claims) { c.Issuer = "someone" })),
		fuzzSign(f, fuzzActiveKid, active, edit(org, func(c *claims) { c.Subject = "other" })),
		fuzzSign(f, fuzzActiveKid, active, edit(org, func(c *claims) { c.Site = "site-1" })),
		fuzzSign(f, fuzzActiveKid, active, edit(org, func(c *claims) { c.Roles = []string{"admin"} })),
		fuzzSign(f, fuzzActiveKid, active, edit(org, func(c *claims) { c.Kind = "root" })),
		fuzzSign(f, fuzzActiveKid, active, edit(endUser, func(c *claims) { c.Roles = []string{"rewards"} })),
		fuzzSign(f, fuzzActiveKid, active, edit(endUser, func(c *claims) { c.Site = "" })),
		"", ".", "..", "a.b.c", "a.b", "a.b.c.d", "eyJ.eyJ.", strings.Repeat("A", 4096),
	}
	// alg none, and HS256 keyed with the public key (algorithm confusion).
	none := jwt.NewWithClaims(jwt.SigningMethodNone, org)
	none.Header["kid"] = fuzzActiveKid
	if s, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType); err == nil {
		seeds = append(seeds, s)
	}
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, org)
	hs.Header["kid"] = fuzzActiveKid
	if s, err := hs.SignedString([]byte(active.Public().(ed25519.PublicKey))); err == nil {
		seeds = append(seeds, s)
	}
	// The genuine token with its payload altered, and with the kid a number.
	parts := strings.Split(good, ".")
	payload, _ := json.Marshal(edit(org, func(c *claims) { c.Org = "other-org" }))
	seeds = append(seeds, parts[0]+"."+base64.RawURLEncoding.EncodeToString(payload)+"."+parts[2],
		base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"EdDSA","kid":7}`))+"."+parts[1]+"."+parts[2],
		good+" ", " "+good, strings.ToUpper(good))
	// The genuine token, re-spelt: the last character of an Ed25519 signature's 86 carries 4
	// padding bits, and base64 decoding skips CR and LF. Both variants decode to the genuine
	// signature.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	sig := parts[2]
	flipped := alphabet[strings.IndexByte(alphabet, sig[len(sig)-1])^1]
	seeds = append(seeds, parts[0]+"."+parts[1]+"."+sig[:len(sig)-1]+string(flipped),
		parts[0]+"."+parts[1]+"."+sig[:40]+"\n"+sig[40:])
	for _, s := range seeds {
		f.Add(s)
	}

	wantOrg := &Principal{Kind: KindOrganisation, Namespace: "acme", ClientName: "acme-app", Username: "acme-app",
		Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleRewards}}
	f.Fuzz(func(t *testing.T, token string) {
		p, err := iss.Verify(context.Background(), token)
		if err != nil {
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("%q: error %v is not an ErrInvalidToken", token, err)
			}
			if p != nil {
				t.Fatalf("%q: refused (%v) with a principal %+v", token, err, p)
			}
			return
		}
		if p == nil || validate(p) != nil {
			t.Fatalf("%q: accepted as an invalid principal %+v", token, p)
		}
		if !canonicalJWT(token) {
			t.Fatalf("%q: accepted, yet it is not the string the issuer issued (a non-canonical encoding "+
				"of a genuine token; principal %+v)", token, p)
		}
		if strings.HasPrefix(token, parts[0]+"."+parts[1]+".") && !reflect.DeepEqual(p, wantOrg) {
			t.Fatalf("%q: the seed token verifies as %+v, want %+v", token, p, wantOrg)
		}
	})
}

package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func orgPrincipal() Principal {
	return Principal{
		Namespace:  "acme",
		ClientName: "acme-app",
		Username:   "acme-app",
		Roles:      []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleComponents},
	}
}

func endUserPrincipal() Principal {
	return Principal{
		Namespace:  "acme",
		ClientName: "acme-app",
		Username:   "acme-app",
		SiteName:   "site-1200000000011",
		UserID:     "6f1c2d4e-8a7b-4c3d-9e0f-1a2b3c4d5e6f",

		AllowedOrigin: "https://app.example.com",
	}
}

// parseUnverified returns a token's header and claims, for looking at what was issued.
func parseUnverified(t *testing.T, token string) (map[string]any, jwt.MapClaims) {
	t.Helper()
	claims := jwt.MapClaims{}
	tok, _, err := jwt.NewParser().ParseUnverified(token, claims)
	if err != nil {
		t.Fatal(err)
	}
	return tok.Header, claims
}

func TestIssueVerifyRoundTrip(t *testing.T) {
	ring := newRing(t)
	clk := &clock{now: t0}
	iss := NewIssuer(ring, clk.Now)
	activeKid, _, err := ring.signingKey()
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name    string
		issue   func(Principal) (string, time.Duration, error)
		p       Principal
		kind    Kind
		ttl     time.Duration
		subject string
	}{
		{"organisation", iss.IssueOrganisationToken, orgPrincipal(), KindOrganisation, time.Hour, "acme-app"},
		{"organisation without roles", iss.IssueOrganisationToken,
			Principal{Namespace: "acme", ClientName: "ro", Username: "ro"}, KindOrganisation, time.Hour, "ro"},
		{"end user", iss.IssueEndUserToken, endUserPrincipal(), KindEndUser, 24 * time.Hour, endUserPrincipal().UserID},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			token, ttl, err := tc.issue(tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if ttl != tc.ttl {
				t.Errorf("expires in %v, want %v", ttl, tc.ttl)
			}

			header, claims := parseUnverified(t, token)
			if header["alg"] != "EdDSA" || header["kid"] != activeKid {
				t.Errorf("header = %v, want alg EdDSA and kid %s", header, activeKid)
			}
			if claims["iss"] != "flexsite" || claims["sub"] != tc.subject || claims["kind"] != string(tc.kind) ||
				claims["jti"] == "" || claims["iat"] != float64(t0.Unix()) || claims["exp"] != float64(t0.Add(tc.ttl).Unix()) {
				t.Errorf("claims = %v", claims)
			}

			got, err := iss.Verify(t.Context(), token)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.p
			want.Kind = tc.kind
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("Verify() = %+v, want %+v", *got, want)
			}
		})
	}
}

func TestIssueRejectsBadPrincipals(t *testing.T) {
	iss := NewIssuer(newRing(t), time.Now)
	endUser := func(edit func(*Principal)) Principal { p := endUserPrincipal(); edit(&p); return p }
	tests := []struct {
		name  string
		issue func(Principal) (string, time.Duration, error)
		p     Principal
	}{
		{"organisation with a site", iss.IssueOrganisationToken, endUserPrincipal()},
		{"organisation with an unknown role", iss.IssueOrganisationToken,
			Principal{Namespace: "acme", ClientName: "a", Username: "a", Roles: []flexv1.Role{"admin"}}},
		{"organisation without namespace", iss.IssueOrganisationToken, Principal{ClientName: "a", Username: "a"}},
		{"end-user principal as organisation", iss.IssueOrganisationToken,
			Principal{Kind: KindEndUser, Namespace: "acme", ClientName: "a", Username: "a"}},
		{"end user without site", iss.IssueEndUserToken, endUser(func(p *Principal) { p.SiteName = "" })},
		{"end user without user id", iss.IssueEndUserToken, endUser(func(p *Principal) { p.UserID = "" })},
		{"end user without allowed origin", iss.IssueEndUserToken, endUser(func(p *Principal) { p.AllowedOrigin = "" })},
		{"organisation with allowed origin", iss.IssueOrganisationToken,
			Principal{Namespace: "acme", ClientName: "a", Username: "a", AllowedOrigin: "https://app.example.com"}},
		{"end user with roles", iss.IssueEndUserToken, endUser(func(p *Principal) { p.Roles = []flexv1.Role{flexv1.RoleRewards} })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if token, _, err := tc.issue(tc.p); err == nil {
				t.Errorf("issued %q for %+v", token, tc.p)
			}
		})
	}
}

func TestVerifyExpiry(t *testing.T) {
	ring := newRing(t)
	clk := &clock{now: t0}
	iss := NewIssuer(ring, clk.Now)
	org, _, err := iss.IssueOrganisationToken(orgPrincipal())
	if err != nil {
		t.Fatal(err)
	}
	endUser, _, err := iss.IssueEndUserToken(endUserPrincipal())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		token   string
		after   time.Duration
		wantErr error
	}{
		{"organisation, fresh", org, 0, nil},
		{"organisation, last second", org, time.Hour - time.Second, nil},
		{"organisation, within leeway", org, time.Hour + 29*time.Second, nil},
		{"organisation, expired", org, time.Hour + 31*time.Second, ErrExpiredToken},
		{"end user, after an hour", endUser, time.Hour + time.Minute, nil},
		{"end user, expired", endUser, 24*time.Hour + time.Minute, ErrExpiredToken},
		{"issued in the future", org, -time.Minute, ErrInvalidToken},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk.now = t0.Add(tc.after)
			_, err := iss.Verify(t.Context(), tc.token)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Errorf("Verify() error = %v, want %v", err, tc.wantErr)
			}
			if errors.Is(tc.wantErr, ErrExpiredToken) && !errors.Is(err, ErrInvalidToken) {
				t.Errorf("expired token error %v is not an ErrInvalidToken", err)
			}
		})
	}
}

// validClaims are the claims of a good organisation token issued at now.
func validClaims(now time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"iss": "flexsite", "sub": "acme-app", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": "j1",
		"org": "acme", "cli": "acme-app", "usr": "acme-app", "kind": "organisation", "roles": []string{"entity_read"},
	}
}

// sign makes a token with any method, key, kid (none if nil) and claims: the tests' forger.
func sign(t *testing.T, method jwt.SigningMethod, key any, kid any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != nil {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// segment is the base64url encoding of v as JSON, as a JWT segment.
func segment(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func TestVerifyRejects(t *testing.T) {
	ring := newRing(t)
	clk := &clock{now: t0}
	iss := NewIssuer(ring, clk.Now)
	kid, key, err := ring.signingKey()
	if err != nil {
		t.Fatal(err)
	}
	public := key.Public().(ed25519.PublicKey)
	_, foreign, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	good, _, err := iss.IssueOrganisationToken(orgPrincipal())
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(good, ".")

	// claims returns validClaims changed by edits (a nil value deletes the claim).
	claims := func(edits jwt.MapClaims) jwt.MapClaims {
		c := validClaims(t0)
		maps.Copy(c, edits)
		maps.DeleteFunc(c, func(_ string, v any) bool { return v == nil })
		return c
	}
	ourKey := func(edits jwt.MapClaims) string { return sign(t, jwt.SigningMethodEdDSA, key, kid, claims(edits)) }

	tamperedSignature := func() string {
		sig, err := base64.RawURLEncoding.DecodeString(parts[2])
		if err != nil {
			t.Fatal(err)
		}
		sig[10] ^= 1
		return parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)
	}
	publicPEM := func() []byte {
		der, err := x509.MarshalPKIXPublicKey(public)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}

	tests := []struct {
		name  string
		token string
	}{
		{"empty", ""},
		{"not a JWT", "not-a-token"},
		{"foreign key, our kid", sign(t, jwt.SigningMethodEdDSA, foreign, kid, validClaims(t0))},
		{"foreign key, unknown kid", sign(t, jwt.SigningMethodEdDSA, foreign, "0123456789abcdef", validClaims(t0))},
		{"tampered signature", tamperedSignature()},
		{"tampered claims", parts[0] + "." + segment(t, claims(jwt.MapClaims{"org": "other"})) + "." + parts[2]},
		{"no signature", parts[0] + "." + parts[1] + "."},
		{"alg none", segment(t, map[string]string{"alg": "none", "typ": "JWT", "kid": kid}) + "." +
			segment(t, validClaims(t0)) + "."},
		{"HS256 keyed with the raw public key", sign(t, jwt.SigningMethodHS256, []byte(public), kid, validClaims(t0))},
		{"HS256 keyed with the PEM public key", sign(t, jwt.SigningMethodHS256, publicPEM(), kid, validClaims(t0))},
		{"no kid", sign(t, jwt.SigningMethodEdDSA, key, nil, validClaims(t0))},
		{"empty kid", sign(t, jwt.SigningMethodEdDSA, key, "", validClaims(t0))},
		{"kid not a string", sign(t, jwt.SigningMethodEdDSA, key, 7, validClaims(t0))},
		{"wrong issuer", ourKey(jwt.MapClaims{"iss": "someone-else"})},
		{"no issuer", ourKey(jwt.MapClaims{"iss": nil})},
		{"no expiry", ourKey(jwt.MapClaims{"exp": nil})},
		{"expiry not a number", ourKey(jwt.MapClaims{"exp": "tomorrow"})},
		{"no kind", ourKey(jwt.MapClaims{"kind": nil})},
		{"unknown kind", ourKey(jwt.MapClaims{"kind": "admin"})},
		{"unknown role", ourKey(jwt.MapClaims{"roles": []string{"superuser"}})},
		{"roles not a list", ourKey(jwt.MapClaims{"roles": "entity_read"})},
		{"no organisation", ourKey(jwt.MapClaims{"org": nil})},
		{"no client", ourKey(jwt.MapClaims{"cli": nil})},
		{"subject is not the username", ourKey(jwt.MapClaims{"sub": "someone-else"})},
		{"organisation token with a site", ourKey(jwt.MapClaims{"site": "site-1"})},
		{"end-user token without site", ourKey(jwt.MapClaims{"kind": "end_user", "sub": "u1", "roles": nil})},
		{"end-user token without user id", ourKey(jwt.MapClaims{"kind": "end_user", "sub": nil, "site": "s", "roles": nil})},
		{"end-user token with roles", ourKey(jwt.MapClaims{"kind": "end_user", "sub": "u1", "site": "s"})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := iss.Verify(t.Context(), tc.token)
			if !errors.Is(err, ErrInvalidToken) || p != nil {
				t.Errorf("Verify() = %+v, %v; want ErrInvalidToken", p, err)
			}
			if errors.Is(err, ErrExpiredToken) {
				t.Errorf("Verify() = %v, want a reason other than expiry", err)
			}
		})
	}

	// The forger works: the same claims signed properly verify.
	if _, err := iss.Verify(t.Context(), ourKey(nil)); err != nil {
		t.Errorf("Verify(well-formed forged-in-test token) = %v", err)
	}
}

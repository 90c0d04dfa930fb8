package auth

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

const (
	// issuer is the iss claim of every token.
	issuer = "flexsite"
	// leeway absorbs clock skew between the replica that issued a token and the one verifying it.
	leeway = 30 * time.Second
)

// claims is a token's payload.
type claims struct {
	jwt.RegisteredClaims
	Org   string   `json:"org"`
	Cli   string   `json:"cli"`
	Usr   string   `json:"usr"`
	Kind  Kind     `json:"kind"`
	Roles []string `json:"roles,omitempty"`
	Site  string   `json:"site,omitempty"`
	// Aor is an end-user token's allowed origin.
	Aor string `json:"aor,omitempty"`
}

// Issuer signs and verifies tokens. It is safe for concurrent use.
type Issuer struct {
	keys     *KeyRing
	now      func() time.Time
	parser   *jwt.Parser
	verified verifiedTokens
}

// NewIssuer returns an issuer that signs with the active key of keys and verifies with any
// key of it. now is the clock: time.Now (the default when nil) outside tests.
func NewIssuer(keys *KeyRing, now func() time.Time) *Issuer {
	if now == nil {
		now = time.Now
	}
	return &Issuer{
		keys: keys,
		now:  now,
		// Only EdDSA: this is what refuses "alg: none" and the HS256-with-the-public-key
		// confusion attack before any key is looked at.
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
			jwt.WithIssuer(issuer),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(leeway),
			jwt.WithTimeFunc(now),
			// One spelling per token: the signature's unused padding bits must be zero.
			jwt.WithStrictDecoding(),
		),
	}
}

// IssueOrganisationToken returns a token for an API client acting for its organisation, and
// how long it lives.
func (i *Issuer) IssueOrganisationToken(p Principal) (string, time.Duration, error) {
	return i.issue(p, KindOrganisation, OrganisationTokenTTL)
}

// IssueEndUserToken returns a token for an end user that reaches the one site p.SiteName,
// and how long it lives.
func (i *Issuer) IssueEndUserToken(p Principal) (string, time.Duration, error) {
	return i.issue(p, KindEndUser, EndUserTokenTTL)
}

func (i *Issuer) issue(p Principal, kind Kind, ttl time.Duration) (string, time.Duration, error) {
	if p.Kind != "" && p.Kind != kind {
		return "", 0, fmt.Errorf("cannot issue a %s token for a %s principal", kind, p.Kind)
	}
	p.Kind = kind
	if err := validate(&p); err != nil {
		return "", 0, err
	}
	kid, key, err := i.keys.signingKey()
	if err != nil {
		return "", 0, err
	}
	now := i.now()
	c := claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuer,
			Subject:   subject(&p),
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
			ID:        rand.Text(),
		},
		Org:  p.Namespace,
		Cli:  p.ClientName,
		Usr:  p.Username,
		Kind: kind,
		Site: p.SiteName,
		Aor:  p.AllowedOrigin,
	}
	for _, r := range p.Roles {
		c.Roles = append(c.Roles, string(r))
	}
	token := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	token.Header["kid"] = kid
	signed, err := token.SignedString(key)
	if err != nil {
		return "", 0, err
	}
	return signed, ttl, nil
}

// Verify checks a token's signature and claims and returns whom it speaks for. It does not
// look the API client up: ClientActive does that from the cache. The principal may be
// shared with the other requests made with the same token: read-only.
func (i *Issuer) Verify(ctx context.Context, token string) (*Principal, error) {
	if !wellFormed(token) {
		return nil, fmt.Errorf("%w: characters outside base64url", ErrInvalidToken)
	}
	now := i.now()
	if p, kid, ok := i.verified.get(token, now); ok {
		if i.keys.has(kid) {
			return p, nil
		}
	}
	p, v, err := i.verify(ctx, token)
	if err != nil {
		return nil, err
	}
	i.verified.put(token, p, v.kid, v.notBefore, v.expires, now) // a copy: p stays the caller's
	return p, nil
}

// wellFormed reports whether a token is spelt only with what a JWT may contain (base64url and
// the dots between parts): the decoder would otherwise skip CR and LF, letting one token be
// spelt several ways.
func wellFormed(token string) bool {
	for i := 0; i < len(token); i++ {
		if !tokenByte[token[i]] {
			return false
		}
	}
	return token != ""
}

// tokenByte marks the bytes a token may hold: a table, as a search of the alphabet per byte
// was a twentieth of a cheap read's CPU.
var tokenByte = func() (t [256]bool) {
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_." {
		t[c] = true
	}
	return t
}()

// verification is what a successful check learnt about a token, for the cache.
type verification struct {
	kid                string
	notBefore, expires time.Time
}

// verify checks a token's signature and claims: the work Verify caches.
func (i *Issuer) verify(ctx context.Context, token string) (*Principal, verification, error) {
	c := &claims{}
	var kid string
	_, err := i.parser.ParseWithClaims(token, c, func(t *jwt.Token) (any, error) {
		var ok bool
		if kid, ok = t.Header["kid"].(string); !ok || kid == "" {
			return nil, errors.New("no key id")
		}
		return i.keys.verificationKey(ctx, kid, i.now())
	})
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return nil, verification{}, ErrExpiredToken
	case err != nil:
		// %v, not %w: the library's errors are not part of this package's contract.
		return nil, verification{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	p := &Principal{
		Kind:       c.Kind,
		Namespace:  c.Org,
		ClientName: c.Cli,
		Username:   c.Usr,
		SiteName:   c.Site,

		AllowedOrigin: c.Aor,
	}
	for _, r := range c.Roles {
		p.Roles = append(p.Roles, flexv1.Role(r))
	}
	if p.Kind == KindEndUser {
		p.UserID = c.Subject
	}
	if err := validate(p); err != nil {
		return nil, verification{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if c.Subject != subject(p) {
		return nil, verification{}, fmt.Errorf("%w: subject does not match the principal", ErrInvalidToken)
	}
	v := verification{kid: kid, expires: c.ExpiresAt.Add(leeway)}
	if c.IssuedAt != nil {
		v.notBefore = c.IssuedAt.Add(-leeway)
	}
	return p, v, nil
}

// subject is the sub claim: the username for an organisation, the user id for an end user.
func subject(p *Principal) string {
	if p.Kind == KindEndUser {
		return p.UserID
	}
	return p.Username
}

// validate checks that p is a well-formed principal of its kind. The same rules apply when
// issuing and when verifying, so a token that verifies is one this package could have issued.
func validate(p *Principal) error {
	if p.Namespace == "" || p.ClientName == "" || p.Username == "" {
		return errors.New("principal needs an organisation, a client name and a username")
	}
	switch p.Kind {
	case KindOrganisation:
		if p.SiteName != "" || p.UserID != "" || p.AllowedOrigin != "" {
			return errors.New("an organisation principal has no site, no user id and no allowed origin")
		}
		for _, r := range p.Roles {
			if !knownRole(r) {
				return fmt.Errorf("unknown role %q", r)
			}
		}
	case KindEndUser:
		if p.SiteName == "" || p.UserID == "" || p.AllowedOrigin == "" {
			return errors.New("an end-user principal needs a site, a user id and an allowed origin")
		}
		if len(p.Roles) > 0 {
			return errors.New("an end-user principal has no roles")
		}
	default:
		return fmt.Errorf("unknown principal kind %q", p.Kind)
	}
	return nil
}

func knownRole(r flexv1.Role) bool { return r.Known() }

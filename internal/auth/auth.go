// Package auth issues and verifies the REST API's bearer tokens and checks API client
// credentials.
//
// Tokens are EdDSA-signed JWTs that are verified without an API lookup (design decision 8):
// the signature and the claims say who the caller is. The signing keys live in a Secret so
// that every replica signs and verifies with the same keys and a key can be rotated without a
// restart. Passwords are checked against bcrypt hashes kept in Secrets; the passwords
// themselves are never stored or logged, and neither are tokens.
package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/meters"
)

// Kind of principal.
type Kind string

const (
	// KindOrganisation is an API client acting for its organisation.
	KindOrganisation Kind = "organisation"
	// KindEndUser is an end user of an organisation, reaching one site.
	KindEndUser Kind = "end_user"
)

// Token lifetimes, as the API reference publishes them.
const (
	OrganisationTokenTTL = time.Hour
	EndUserTokenTTL      = 24 * time.Hour
)

// Errors. Callers tell them apart with errors.Is.
var (
	// ErrInvalidCredentials is a login with an unknown username or a wrong password. The two are
	// deliberately not told apart.
	ErrInvalidCredentials = errors.New("invalid credentials")
	// ErrInvalidToken is a token that is malformed, badly signed or carries bad claims.
	ErrInvalidToken = errors.New("invalid token")
	// ErrExpiredToken is a token past its expiry. It is also an ErrInvalidToken, so a caller
	// that only cares whether a token is usable checks for that alone.
	ErrExpiredToken = fmt.Errorf("%w: expired", ErrInvalidToken)
	// ErrClientDisabled is an API client that is disabled or no longer exists.
	ErrClientDisabled = errors.New("API client disabled")
)

// Principal is who a verified token speaks for.
type Principal struct {
	Kind       Kind
	Namespace  string        // the organisation (namespace)
	ClientName string        // APIClient object name that obtained the token (both kinds)
	Username   string        // APIClient spec.username
	Roles      []flexv1.Role // organisation tokens only
	SiteName   string        // end-user tokens: the one Site object (in Namespace) the token may reach
	UserID     string        // end-user tokens: the end user's id (uuid)
	// AllowedOrigin is, for end-user tokens, the web origin (scheme://host[:port]) allowed to
	// embed the hosted flow and to call the API from a browser with this token (CORS).
	AllowedOrigin string
}

// MPANViewer is whom an answer to the principal goes to, for what it may see of an MPAN
// (meters.MPANFor): an organisation's API client sees MPANs in full; anyone else (an end
// user's component token, or no principal at all) is a household, shown them masked.
func (p *Principal) MPANViewer() meters.Viewer {
	if p != nil && p.Kind == KindOrganisation {
		return meters.OrganisationViewer
	}
	return meters.HouseholdViewer
}

// HasRole tells whether the principal holds role r. End users hold no roles.
func (p *Principal) HasRole(r flexv1.Role) bool {
	return slices.Contains(p.Roles, r)
}

type principalKey struct{}

// WithPrincipal returns a context that carries p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal WithPrincipal stored in ctx.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

// BearerToken extracts the token of an "Authorization: Bearer <token>" header. The scheme is
// case-insensitive (RFC 7235); anything but exactly one scheme, one space and one non-empty
// token is refused, and so is a request with more than one Authorization header, so that no
// two parts of the stack can disagree about which token a request carries.
func BearerToken(r *http.Request) (string, bool) {
	values := r.Header.Values("Authorization")
	if len(values) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(values[0], " ")
	// Two byte searches, not ContainsAny: it runs over the whole token on every request.
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" ||
		strings.IndexByte(token, ' ') >= 0 || strings.IndexByte(token, '\t') >= 0 {
		return "", false
	}
	return token, true
}

package facade

import (
	"errors"
	"net/http"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
)

// handler is an authenticated endpoint: it returns the 200 body (noContent for a 204), or an
// error that writeError turns into the documented error form.
type handler func(r *http.Request, p *auth.Principal) (any, error)

// noContent is what a handler returns to answer 204 No Content.
type noContent struct{}

// bearerChallenge is the header every 401 carries (RFC 6750).
var bearerChallenge = map[string]string{"WWW-Authenticate": "Bearer"}

var errNotAuthenticated = &apiError{status: http.StatusUnauthorized, detail: "Not authenticated", headers: bearerChallenge}

var errBadCredentials = &apiError{status: http.StatusUnauthorized, detail: "Could not validate credentials",
	headers: bearerChallenge}

// authenticated verifies the bearer token (signature and claims, no API call), checks the
// API client is still active (a cache lookup), and enforces the token kind and roles:
// endUserAllowed admits end-user (component) tokens, whose site is checked by siteFor;
// an organisation token must hold every role listed.
func (s *Server) authenticated(h handler, endUserAllowed bool, roles ...flexv1.Role) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A valid token is never refused for others' failures: the token is verified first
		// (a signature check, no API call), and only a caller whose token fails spends the
		// failure budget of its address, so one client retrying a bad token behind a shared
		// proxy address cannot lock out the others.
		p, err := s.principal(r)
		switch {
		case err != nil:
			address := s.clientAddress(r)
			if s.limiter.authFailures.exhausted(address) {
				err = s.tooManyRequests(s.limiter.authFailures, "auth_failures")
			}
			s.limiter.authFailures.charge(address)
		case !s.limiter.perClient.allow(rateKey(p)):
			err = s.tooManyRequests(s.limiter.perClient, "per_client")
		default:
			err = authorise(p, endUserAllowed, roles)
		}
		if info := infoOf(w); info != nil && p != nil {
			info.principal = p
		}
		if endUserAllowed {
			corsGrant(w, r, p)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		body, err := h(r.WithContext(auth.WithPrincipal(r.Context(), p)), p)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if _, empty := body.(noContent); empty {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if ws, ok := body.(withStatus); ok {
			writeJSON(w, ws.status, ws.body)
			return
		}
		writeJSON(w, http.StatusOK, body)
	})
}

func (s *Server) principal(r *http.Request) (*auth.Principal, error) {
	token, ok := auth.BearerToken(r)
	if !ok {
		return nil, errNotAuthenticated
	}
	p, err := s.Issuer.Verify(r.Context(), token)
	if err != nil {
		return nil, errBadCredentials
	}
	p, err = s.Authenticator.ClientActive(r.Context(), p)
	if err != nil {
		if errors.Is(err, auth.ErrClientDisabled) {
			return nil, errBadCredentials
		}
		return nil, err
	}
	return p, nil
}

// rateKey is whose budget a request spends: the API client's, or the end user's.
func rateKey(p *auth.Principal) string {
	if p.Kind == auth.KindEndUser {
		return p.Namespace + "/user/" + p.UserID
	}
	return p.Namespace + "/client/" + p.ClientName
}

func authorise(p *auth.Principal, endUserAllowed bool, roles []flexv1.Role) error {
	if p.Kind == auth.KindEndUser {
		if !endUserAllowed {
			return fail(http.StatusForbidden, "This endpoint needs an organisation token")
		}
		return nil
	}
	for _, role := range roles {
		if !p.HasRole(role) {
			return fail(http.StatusForbidden, "The API client lacks the %s role", role)
		}
	}
	return nil
}

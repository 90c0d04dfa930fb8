package web

import (
	"cmp"
	"errors"
	"net/http"

	"github.com/go-logr/logr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/metrics"
)

// Handler is an authenticated endpoint: it answers the 200 body (NoContent for a 204,
// WithStatus for another status), or an error WriteError turns into the documented form.
type Handler func(r *http.Request, p *auth.Principal) (any, error)

// NoContent is what a Handler answers for 204 No Content.
type NoContent struct{}

// WithStatus answers Body with a status other than 200, or with headers of its own.
type WithStatus struct {
	Status int
	Body   any
	// Headers are set on the answer (a page's Link to the next one).
	Headers map[string]string
}

// bearerChallenge is the header every 401 carries (RFC 6750).
var bearerChallenge = map[string]string{"WWW-Authenticate": "Bearer"}

// ErrNotAuthenticated answers a request without a bearer token.
var ErrNotAuthenticated = &Error{Status: http.StatusUnauthorized, Detail: "Not authenticated", Headers: bearerChallenge}

// ErrBadCredentials answers a token that does not verify, or whose client is disabled.
var ErrBadCredentials = &Error{Status: http.StatusUnauthorized, Detail: "Could not validate credentials",
	Headers: bearerChallenge}

// Unauthorized is a 401 with the bearer challenge and, for the token endpoint, an OAuth code.
func Unauthorized(detail, oauth string) error {
	return &Error{Status: http.StatusUnauthorized, Detail: detail, Headers: bearerChallenge, OAuth: oauth}
}

// Authenticator verifies the bearer tokens of every door's authenticated routes.
type Authenticator struct {
	Log           logr.Logger
	Issuer        *auth.Issuer
	Authenticator *auth.Authenticator
	Limits        *Limiters
	// TrustedProxies are the networks of the reverse proxies in front of Flexsite.
	TrustedProxies TrustedProxies
}

// Guard wraps h: it verifies the bearer token (signature and claims, no API call), checks the
// API client is still active (a cache lookup), and enforces the token kind and roles:
// endUserAllowed admits end-user (component) tokens (whose site the use case checks); an
// organisation token must hold every role listed. The principal rides in the request's
// context (auth.WithPrincipal), so that every write names its field manager.
func (a *Authenticator) Guard(h Handler, endUserAllowed bool, roles ...flexv1.Role) http.Handler {
	return a.GuardWith(WriteError, h, endUserAllowed, roles...)
}

// ErrorWriter answers a refusal in a door's own error form: WriteError's FastAPI form for the
// REST API, the OpenADR door's problem form for OpenADR.
type ErrorWriter func(log logr.Logger, w http.ResponseWriter, r *http.Request, err error)

// GuardWith is Guard answering every refusal (its own and the handler's) with writeError.
func (a *Authenticator) GuardWith(writeError ErrorWriter, h Handler, endUserAllowed bool, roles ...flexv1.Role) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A valid token is never refused for others' failures: the token is verified first
		// (a signature check, no API call), and only a caller whose token fails spends the
		// failure budget of its address, so one client retrying a bad token behind a shared
		// proxy address cannot lock out the others.
		p, err := a.principal(r)
		switch {
		case err != nil:
			address := a.TrustedProxies.ClientAddress(r)
			if a.Limits.AuthFailures.Exhausted(address) {
				err = TooManyRequests(a.Limits.AuthFailures, "auth_failures")
			}
			a.Limits.AuthFailures.Charge(address)
		case !a.Limits.PerClient.allowKey(appendRateKey(make([]byte, 0, 128), p)):
			err = TooManyRequests(a.Limits.PerClient, "per_client")
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
			writeError(a.Log, w, r, err)
			return
		}
		body, err := h(r.WithContext(auth.WithPrincipal(r.Context(), p)), p)
		if err != nil {
			writeError(a.Log, w, r, err)
			return
		}
		switch b := body.(type) {
		case NoContent:
			w.WriteHeader(http.StatusNoContent)
		case WithStatus:
			for k, v := range b.Headers {
				w.Header().Set(k, v)
			}
			WriteJSON(w, cmp.Or(b.Status, http.StatusOK), b.Body)
		case Streamer:
			WriteStream(a.Log, w, r, http.StatusOK, b)
		default:
			WriteJSON(w, http.StatusOK, body)
		}
	})
}

func (a *Authenticator) principal(r *http.Request) (*auth.Principal, error) {
	token, ok := auth.BearerToken(r)
	if !ok {
		return nil, ErrNotAuthenticated
	}
	p, err := a.Issuer.Verify(r.Context(), token)
	if err != nil {
		return nil, ErrBadCredentials
	}
	p, err = a.Authenticator.ClientActive(r.Context(), p)
	if err != nil {
		if errors.Is(err, auth.ErrClientDisabled) {
			return nil, ErrBadCredentials
		}
		return nil, err
	}
	return p, nil
}

// appendRateKey appends whose budget a request spends: the API client's, or the end user's.
// Into a buffer on the caller's stack: the key is only looked up (allowKey), never kept,
// except once by the limiter for a caller it has not seen.
func appendRateKey(b []byte, p *auth.Principal) []byte {
	b = append(b, p.Namespace...)
	if p.Kind == auth.KindEndUser {
		return append(append(b, "/user/"...), p.UserID...)
	}
	return append(append(b, "/client/"...), p.ClientName...)
}

func authorise(p *auth.Principal, endUserAllowed bool, roles []flexv1.Role) error {
	if p.Kind == auth.KindEndUser {
		if !endUserAllowed {
			return Fail(http.StatusForbidden, "This endpoint needs an organisation token")
		}
		return nil
	}
	for _, role := range roles {
		if !p.HasRole(role) {
			return Fail(http.StatusForbidden, "The API client lacks the %s role", role)
		}
	}
	return nil
}

// Login checks an API client's username and password for a token endpoint (the REST API's
// password form, OpenADR's client credentials), under the password-guessing budgets: once a
// username (tried from this address) or an address has used up its failures, it answers 429
// without checking any password. The username's budget is kept per address, so that nobody
// elsewhere can lock an organisation out of its own login by failing with its username; the
// address is the client's, behind trusted proxies too. Its refusals carry their RFC 6749
// error code (invalid_grant for bad credentials).
func (a *Authenticator) Login(r *http.Request, username, password string) (*auth.Principal, error) {
	limits := a.Limits
	address := a.TrustedProxies.ClientAddress(r)
	userKey := username + "\x00" + address
	if limits.LoginUser.Exhausted(userKey) || limits.LoginAddress.Exhausted(address) {
		metrics.LoginFailures.WithLabelValues(metrics.LoginRateLimited).Inc()
		e := TooManyRequests(limits.LoginUser, "login_failures").(*Error) //nolint:errorlint,forcetypeassert // built just above
		e.OAuth = "invalid_request"
		return nil, e
	}
	p, err := a.Authenticator.Login(r.Context(), username, password)
	if err != nil {
		if errors.Is(err, auth.ErrInvalidCredentials) || errors.Is(err, auth.ErrClientDisabled) {
			metrics.LoginFailures.WithLabelValues(metrics.LoginBadCredentials).Inc()
			limits.LoginUser.Charge(userKey)
			limits.LoginAddress.Charge(address)
			return nil, Unauthorized("Incorrect username or password", "invalid_grant")
		}
		return nil, err
	}
	return p, nil
}

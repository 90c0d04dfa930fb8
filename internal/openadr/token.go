package openadr

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/web"
)

// fetchToken is the document's auth/token: the OAuth 2.0 client credentials grant (RFC 6749
// section 4.4) for an organisation's API client, whose username is the client_id and password
// the client_secret, sent in the form or with HTTP Basic (section 2.3.1). It answers the same
// signed organisation token as the REST API's, holding the roles the scopes asked for map onto
// (all the client's when it asks for none).
func (d *Door) fetchToken(w http.ResponseWriter, r *http.Request) {
	body, err := web.DecodeForm(r)
	if err != nil {
		writeAuthError(d, w, r, err, "invalid_request", "The body must be a form (application/x-www-form-urlencoded)")
		return
	}
	str := func(k string) string { s, _ := body[k].(string); return s }
	clientID, secret := str("client_id"), str("client_secret")
	basicID, basicSecret, basic := r.BasicAuth()
	switch {
	case str("grant_type") == "":
		writeOAuth(w, http.StatusBadRequest, "invalid_request", "grant_type is required", nil)
		return
	case str("grant_type") != "client_credentials":
		writeOAuth(w, http.StatusBadRequest, "unsupported_grant_type", "Only the client_credentials grant is served", nil)
		return
	case basic && (clientID != "" || secret != ""):
		writeOAuth(w, http.StatusBadRequest, "invalid_request",
			"Send the client's credentials once: in the form or with HTTP Basic, not both", nil)
		return
	case basic:
		// RFC 6749 section 2.3.1: each is form-encoded before it is joined.
		id, errID := url.QueryUnescape(basicID)
		pw, errPW := url.QueryUnescape(basicSecret)
		if errID != nil || errPW != nil {
			writeOAuth(w, http.StatusBadRequest, "invalid_request", "The Basic credentials are not form-encoded", nil)
			return
		}
		clientID, secret = id, pw
	case clientID == "" || secret == "":
		writeOAuth(w, http.StatusBadRequest, "invalid_request", "client_id and client_secret are required", nil)
		return
	}
	var asked []Scope
	for s := range strings.FieldsSeq(str("scope")) {
		asked = append(asked, Scope(s))
	}
	p, err := d.Guard.Login(r, clientID, secret)
	if err != nil {
		var e *web.Error
		if errors.As(err, &e) && e.Status == http.StatusUnauthorized {
			// RFC 6749 section 5.2: invalid_client, a 401 with the scheme the client
			// authenticated with when it used the Authorization header, a 400 otherwise.
			if basic {
				writeOAuth(w, http.StatusUnauthorized, "invalid_client", "Incorrect client_id or client_secret",
					map[string]string{"WWW-Authenticate": `Basic realm="openadr"`})
				return
			}
			writeOAuth(w, http.StatusBadRequest, "invalid_client", "Incorrect client_id or client_secret", nil)
			return
		}
		writeAuthError(d, w, r, err, "invalid_request", "")
		return
	}
	granted := grantedScopes(p.Roles)
	if len(asked) > 0 {
		roles, narrowed, unknown := narrow(p.Roles, asked)
		switch {
		case unknown != "":
			writeOAuth(w, http.StatusBadRequest, "invalid_scope", "Unknown scope "+string(unknown)+"; the scopes are "+scopeText(Scopes), nil)
			return
		case len(narrowed) == 0:
			writeOAuth(w, http.StatusBadRequest, "invalid_scope", "The API client's roles grant none of the scopes asked for", nil)
			return
		}
		p.Roles, granted = roles, narrowed
	}
	token, ttl, err := d.Issuer.IssueOrganisationToken(*p)
	if err != nil {
		writeProblem(d.Log, w, r, err)
		return
	}
	metrics.TokensIssued.WithLabelValues(metrics.TokenOrganisation).Inc()
	expires, scope := int(ttl.Seconds()), scopeText(granted)
	answer := oadr.ClientCredentialResponse{AccessToken: token, TokenType: oadr.Bearer, ExpiresIn: &expires}
	if scope != "" {
		answer.Scope = &scope
	}
	// RFC 6749: token responses must not be cached.
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	web.WriteJSON(w, http.StatusOK, answer)
}

// writeAuthError answers err from the token endpoint: a rate limit or a bad body as an RFC
// 6749 error (with its Retry-After), anything else as a problem.
func writeAuthError(d *Door, w http.ResponseWriter, r *http.Request, err error, code, description string) {
	e := web.HTTPError(err)
	if e == nil || e.Status >= http.StatusInternalServerError {
		writeProblem(d.Log, w, r, err)
		return
	}
	if description == "" {
		description = detailText(e.Detail)
	}
	status := e.Status
	if status == http.StatusUnprocessableEntity {
		status = http.StatusBadRequest
	}
	writeOAuth(w, status, code, description, e.Headers)
}

// writeOAuth answers the document's authError (RFC 6749 section 5.2).
func writeOAuth(w http.ResponseWriter, status int, code, description string, headers map[string]string) {
	for k, v := range headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	web.WriteJSON(w, status, oadr.AuthError{Error: oadr.AuthErrorError(code), ErrorDescription: &description})
}

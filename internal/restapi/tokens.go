package restapi

import (
	"net/http"
	"strings"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
)

// TokenResponse answers POST /auth/token-form (RFC 6749 section 5.1).
type TokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int    `json:"expires_in"`
}

// oauthError gives an answer the RFC 6749 error code OAuth2 client libraries read.
func oauthError(err error, code string) error {
	if e := web.HTTPError(err); e != nil {
		withCode := *e
		withCode.OAuth = code
		return &withCode
	}
	return err
}

// tokenForm is the OAuth2 resource-owner password flow: form username, password and
// grant_type=password give an organisation token valid for an hour.
func (a *API) tokenForm(w http.ResponseWriter, r *http.Request) {
	body, err := web.DecodeForm(r)
	if err != nil {
		web.WriteError(a.Log, w, r, oauthError(err, "invalid_request"))
		return
	}
	f := &fields{}
	username, _ := f.Str(body, []any{"body"}, "username", true)
	password, _ := f.Str(body, []any{"body"}, "password", true)
	code := "invalid_request"
	if gt, ok := f.Str(body, []any{"body"}, "grant_type", false); ok && gt != "password" {
		f.Add("String should match pattern '^password$'", "string_pattern_mismatch", []any{"body", "grant_type"})
		code = "unsupported_grant_type"
	}
	if err := f.Err(); err != nil {
		web.WriteError(a.Log, w, r, oauthError(err, code))
		return
	}
	p, err := a.Guard.Login(r, username, password)
	if err != nil {
		web.WriteError(a.Log, w, r, err)
		return
	}
	token, ttl, err := a.Issuer.IssueOrganisationToken(*p)
	if err != nil {
		web.WriteError(a.Log, w, r, err)
		return
	}
	metrics.TokensIssued.WithLabelValues(metrics.TokenOrganisation).Inc()
	// RFC 6749: token responses must not be cached.
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	web.WriteJSON(w, http.StatusOK, TokenResponse{AccessToken: token, TokenType: "bearer", ExpiresIn: int(ttl.Seconds())})
}

// ComponentTokenResponse answers POST /auth/component-token.
type ComponentTokenResponse struct {
	ID          string `json:"id"`
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
}

// componentToken finds or creates the end user (and the site that is theirs) by the client's
// external_user_id and answers a token for that one site, valid for 24 hours.
func (a *API) componentToken(r *http.Request, p *auth.Principal) (any, error) {
	body, err := web.DecodeForm(r)
	if err != nil {
		return nil, err
	}
	f := &fields{}
	loc := []any{"body"}
	var in app.EndUserInput
	in.ExternalUserID, _ = f.Str(body, loc, "external_user_id", true)
	if origin, ok := f.Str(body, loc, "allowed_origin", true); ok {
		// One spelling per origin, as the browser's Origin header spells it.
		if norm, err := validation.WebOrigin(origin); err != nil {
			f.AddValidation(err, at(loc, "allowed_origin"))
		} else {
			in.AllowedOrigin = norm
		}
	}
	email, hasEmail := f.Str(body, loc, "user_email", false)
	email = strings.TrimSpace(email)
	if hasEmail && email != "" {
		if err := validation.ValidateEmail(email); err != nil {
			f.AddValidation(err, at(loc, "user_email"))
		}
	}
	in.Consent = consent(f, body, loc, false, a.Now())
	if err := f.Err(); err != nil {
		return nil, err
	}
	if hasEmail {
		in.Email = &email
	}
	tok, err := a.Households.IssueEndUserToken(r.Context(), p, in)
	if err != nil {
		return nil, err
	}
	return ComponentTokenResponse{ID: tok.SiteID, AccessToken: tok.AccessToken, TokenType: "bearer"}, nil
}

// UserRecord answers GET /auth/users/me/.
type UserRecord struct {
	Username string        `json:"username"`
	Roles    []flexv1.Role `json:"roles"`
}

func usersMe(_ *http.Request, p *auth.Principal) (any, error) {
	roles := append([]flexv1.Role{}, p.Roles...)
	return UserRecord{Username: p.Username, Roles: roles}, nil
}

// Package oauthprovider is a real OAuth 2.0 authorisation server for tests and for the
// `make run` walk-through: ory/fosite's authorisation code grant with PKCE (S256 enforced),
// refresh-token rotation (a rotated refresh token used again is invalid_grant, and revokes
// the whole grant, as fosite does), RFC 7009 revocation, and a consent page that a person or
// a headless browser clicks through. It stores everything in memory.
//
// It lives in the test module (test/browser) so that fosite and its modules stay out of the
// manager's go.mod. The browser suite runs it in process; the main module's suites run it as a
// process (cmd/flexsite-oauth-provider with -control), through internal/testing/oauthprovider,
// which reads its counters and revokes through the Control handler.
package oauthprovider

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"html/template"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/storage"
	"golang.org/x/crypto/bcrypt"

	contract "github.com/flexsite/flexsite/internal/testing/oauthprovider"
)

// Options configure a provider: the proxy's (internal/testing/oauthprovider), which starts
// this server as a process with them as flags.
type Options = contract.Options

// Provider is a running authorisation server.
type Provider struct {
	opts   Options
	store  *storage.MemoryStore
	oauth2 fosite.OAuth2Provider
	srv    *http.Server
	ln     net.Listener
	// URL is the provider's base URL (http://127.0.0.1:port).
	URL string
	// control serves ControlPath: counters and revocation for another process.
	control bool

	// Counters.
	codeGrants, refreshGrants, refused, revocations atomic.Int64
}

// Start runs a provider on addr ("127.0.0.1:0" for any free port).
func Start(addr string, o Options) (*Provider, error) { return start(addr, o, false) }

// StartControlled runs a provider like Start that also serves ControlPath, for the process
// that started it (internal/testing/oauthprovider). Only on a loopback address.
func StartControlled(addr string, o Options) (*Provider, error) { return start(addr, o, true) }

func start(addr string, o Options, control bool) (*Provider, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p, err := newProvider(o)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	p.ln = ln
	p.control = control
	p.URL = "http://" + ln.Addr().String()
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func newProvider(o Options) (*Provider, error) {
	o = o.WithDefaults()
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	cfg := &fosite.Config{
		GlobalSecret:        secret,
		AccessTokenLifespan: o.AccessTokenLifespan,
		// Every authorisation gets a refresh token (no "offline" scope needed).
		RefreshTokenScopes:             []string{},
		EnforcePKCE:                    true,
		EnablePKCEPlainChallengeMethod: false,
		ScopeStrategy:                  fosite.ExactScopeStrategy,
		AudienceMatchingStrategy:       fosite.DefaultAudienceMatchingStrategy,
	}
	store := storage.NewMemoryStore()
	client := &fosite.DefaultClient{
		ID:            o.ClientID,
		RedirectURIs:  o.RedirectURIs,
		ResponseTypes: []string{"code"},
		GrantTypes:    []string{"authorization_code", "refresh_token"},
		Scopes:        o.Scopes,
		Public:        o.ClientSecret == "",
	}
	if o.ClientSecret != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(o.ClientSecret), bcrypt.MinCost)
		if err != nil {
			return nil, err
		}
		client.Secret = hash
	}
	store.Clients[o.ClientID] = client
	provider := compose.Compose(cfg, store, &compose.CommonStrategy{CoreStrategy: compose.NewOAuth2HMACStrategy(cfg)},
		compose.OAuth2AuthorizeExplicitFactory,
		compose.OAuth2RefreshTokenGrantFactory,
		compose.OAuth2TokenRevocationFactory,
		compose.OAuth2PKCEFactory,
	)
	return &Provider{opts: o, store: store, oauth2: provider}, nil
}

// Close stops the provider.
func (p *Provider) Close() {
	if p.srv != nil {
		_ = p.srv.Close()
	}
}

// AuthorizationURL, TokenURL and RevocationURL are the provider's endpoints.
func (p *Provider) AuthorizationURL() string { return p.URL + "/authorize" }
func (p *Provider) TokenURL() string         { return p.URL + "/token" }
func (p *Provider) RevocationURL() string    { return p.URL + "/revoke" }

// CodeGrants counts authorisation codes exchanged, RefreshGrants refresh tokens exchanged,
// Refused the token requests refused (invalid_grant and the like), Revocations the
// revocation requests answered.
func (p *Provider) CodeGrants() int64    { return p.codeGrants.Load() }
func (p *Provider) RefreshGrants() int64 { return p.refreshGrants.Load() }
func (p *Provider) Refused() int64       { return p.refused.Load() }
func (p *Provider) Revocations() int64   { return p.revocations.Load() }

// RevokeEverything revokes every refresh and access token issued so far, as a household that
// withdraws Flexsite's access at the maker's site: the next refresh is invalid_grant.
func (p *Provider) RevokeEverything() {
	ctx := context.Background()
	ids := make([]string, 0, len(p.store.RefreshTokenRequestIDs))
	for id := range p.store.RefreshTokenRequestIDs {
		ids = append(ids, id)
	}
	for _, id := range ids {
		_ = p.store.RevokeRefreshToken(ctx, id)
		_ = p.store.RevokeAccessToken(ctx, id)
	}
}

// ControlPath is where a provider started with StartControlled answers its Counters (GET)
// and revokes everything (POST ControlPath/revoke-everything): the proxy's contract.
const ControlPath = contract.ControlPath

// Counters is what ControlPath answers.
type Counters = contract.Counters

// Counters reads every counter at once.
func (p *Provider) Counters() Counters {
	return Counters{CodeGrants: p.CodeGrants(), RefreshGrants: p.RefreshGrants(), Refused: p.Refused(),
		Revocations: p.Revocations(), ActiveAccessTokens: p.ActiveAccessTokens()}
}

// ActiveAccessTokens counts the access tokens the provider would accept now.
func (p *Provider) ActiveAccessTokens() int {
	n := 0
	for _, req := range p.store.AccessTokens {
		if req.GetSession().GetExpiresAt(fosite.AccessToken).After(time.Now()) {
			n++
		}
	}
	return n
}

// ServeHTTP serves the provider's endpoints.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/authorize" && r.Method == http.MethodGet:
		p.consentPage(w, r)
	case r.URL.Path == "/authorize" && r.Method == http.MethodPost:
		p.authorize(w, r)
	case r.URL.Path == "/token" && r.Method == http.MethodPost:
		p.token(w, r)
	case r.URL.Path == "/revoke" && r.Method == http.MethodPost:
		p.revoke(w, r)
	case p.control && r.URL.Path == ControlPath && r.Method == http.MethodGet:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(p.Counters())
	case p.control && r.URL.Path == ControlPath+"/revoke-everything" && r.Method == http.MethodPost:
		p.RevokeEverything()
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

var consent = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Name}}: allow Flexsite?</title>
<style>body{font-family:sans-serif;max-width:32rem;margin:3rem auto}button{font-size:1rem;margin-right:1rem;padding:.5rem 1rem}</style>
</head><body><main>
<h1>{{.Name}}</h1>
<p>Flexsite asks to control your devices ({{.Scopes}}) so that you can earn rewards.</p>
<form method="post" action="/authorize?{{.Query}}">
<button type="submit" name="consent" value="allow" id="allow">Allow</button>
<button type="submit" name="consent" value="deny" id="deny">Deny</button>
</form></main></body></html>`))

// consentPage checks the authorisation request (client, redirect URI, PKCE) and asks.
func (p *Provider) consentPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ar, err := p.oauth2.NewAuthorizeRequest(ctx, r)
	if err != nil {
		p.oauth2.WriteAuthorizeError(ctx, w, ar, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = consent.Execute(w, map[string]any{"Name": p.opts.DisplayName, "Scopes": ar.GetRequestedScopes(),
		"Query": template.URL(r.URL.RawQuery)})
}

// authorize answers the consent form: a code to the redirect URI, or access_denied.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ar, err := p.oauth2.NewAuthorizeRequest(ctx, r)
	if err != nil {
		p.oauth2.WriteAuthorizeError(ctx, w, ar, err)
		return
	}
	if r.PostForm.Get("consent") != "allow" {
		p.oauth2.WriteAuthorizeError(ctx, w, ar, fosite.ErrAccessDenied)
		return
	}
	for _, s := range ar.GetRequestedScopes() {
		ar.GrantScope(s)
	}
	resp, err := p.oauth2.NewAuthorizeResponse(ctx, ar, &fosite.DefaultSession{Subject: "household"})
	if err != nil {
		p.oauth2.WriteAuthorizeError(ctx, w, ar, err)
		return
	}
	p.oauth2.WriteAuthorizeResponse(ctx, w, ar, resp)
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	req, err := p.oauth2.NewAccessRequest(ctx, r, &fosite.DefaultSession{})
	if err != nil {
		p.refused.Add(1)
		p.oauth2.WriteAccessError(ctx, w, req, err)
		return
	}
	for _, s := range req.GetRequestedScopes() {
		req.GrantScope(s)
	}
	resp, err := p.oauth2.NewAccessResponse(ctx, req)
	if err != nil {
		p.refused.Add(1)
		p.oauth2.WriteAccessError(ctx, w, req, err)
		return
	}
	if req.GetGrantTypes().ExactOne("refresh_token") {
		p.refreshGrants.Add(1)
	} else {
		p.codeGrants.Add(1)
	}
	p.oauth2.WriteAccessResponse(ctx, w, req, resp)
}

func (p *Provider) revoke(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	err := p.oauth2.NewRevocationRequest(ctx, r)
	if err == nil || errors.Is(err, fosite.ErrNotFound) {
		p.revocations.Add(1)
	}
	p.oauth2.WriteRevocationResponse(ctx, w, err)
}

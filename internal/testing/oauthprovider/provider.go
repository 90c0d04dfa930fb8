// Package oauthprovider runs a real OAuth 2.0 authorisation server for the suites: ory/fosite's
// authorisation code grant with PKCE (S256 enforced), refresh-token rotation (a rotated refresh
// token used again is invalid_grant, and revokes the whole grant), RFC 7009 revocation, and a
// consent page.
//
// fosite is a dependency of the test module only (test/browser: the server itself,
// test/browser/oauthprovider), so the manager's go.mod does not carry it and its ~40 modules.
// Start builds that module's cmd/flexsite-oauth-provider once per test process (or takes
// $FLEXSITE_OAUTH_PROVIDER, which `make test` builds), runs it on a loopback port, and serves
// in front of it: the token endpoint's faults (SetFault) are this process's functions, and the
// counters and RevokeEverything ask the server's control endpoint.
package oauthprovider

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Options configure a provider.
type Options struct {
	// ClientID and ClientSecret of the one registered client (Flexsite); no secret: a public
	// client.
	ClientID, ClientSecret string
	// RedirectURIs registered for the client. A loopback http URI matches any port (RFC 8252),
	// so "http://127.0.0.1/oauth/callback" admits a test server on any port.
	RedirectURIs []string
	// AccessTokenLifespan (default one hour).
	AccessTokenLifespan time.Duration
	// Scopes the client may ask for (default "devices").
	Scopes []string
	// DisplayName shown on the consent page (default "Example Energy").
	DisplayName string
}

// Provider is a running authorisation server.
type Provider struct {
	// URL is the provider's base URL (http://127.0.0.1:port).
	URL string

	server   *exec.Cmd
	stdin    io.Closer
	exited   chan struct{}
	upstream *url.URL
	srv      *http.Server
	proxy    *httputil.ReverseProxy
	client   *http.Client

	mu    sync.Mutex
	fault func(w http.ResponseWriter, r *http.Request) bool
}

// ControlPath is where the provider process, started with -control, answers its Counters
// (GET) and revokes everything (POST ControlPath/revoke-everything). This package holds the
// wire contract between the proxy and the process (Options, ControlPath, Counters): the
// process, in the test module, names these.
const ControlPath = "/_control"

// WithDefaults is o with every option left empty set to its default (the proxy and the
// provider process both apply them, so either may be started alone).
func (o Options) WithDefaults() Options {
	if o.ClientID == "" {
		o.ClientID = "flexsite"
	}
	if o.AccessTokenLifespan == 0 {
		o.AccessTokenLifespan = time.Hour
	}
	if len(o.Scopes) == 0 {
		o.Scopes = []string{"devices"}
	}
	if o.DisplayName == "" {
		o.DisplayName = "Example Energy"
	}
	return o
}

// Start runs a provider on addr ("127.0.0.1:0" for any free port).
func Start(addr string, o Options) (*Provider, error) {
	bin, err := serverBinary()
	if err != nil {
		return nil, err
	}
	o = o.WithDefaults()
	args := []string{"-addr", "127.0.0.1:0", "-control", "-exit-on-stdin-eof", "-client-id", o.ClientID,
		"-client-secret=" + o.ClientSecret, "-scopes", strings.Join(o.Scopes, ","),
		"-access-token-lifetime", o.AccessTokenLifespan.String(), "-display-name", o.DisplayName}
	for _, uri := range o.RedirectURIs {
		args = append(args, "-redirect-uri", uri)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe() // closed when this process ends: the server exits with it
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &Provider{server: cmd, stdin: stdin, exited: make(chan struct{}),
		client: &http.Client{Timeout: 10 * time.Second}}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	lines := bufio.NewReader(stdout)
	first, err := lines.ReadString('\n')
	upstream, found := strings.CutPrefix(strings.TrimSpace(first), "OAuth 2.0 provider on ")
	if err != nil || !found {
		p.stopServer()
		return nil, fmt.Errorf("%s did not say where it listens (%q): %v", bin, first, err)
	}
	go func() { _, _ = io.Copy(io.Discard, lines) }()
	if p.upstream, err = url.Parse(upstream); err != nil {
		p.stopServer()
		return nil, err
	}
	p.proxy = httputil.NewSingleHostReverseProxy(p.upstream)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.stopServer()
		return nil, err
	}
	p.URL = "http://" + ln.Addr().String()
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// ServeHTTP serves the provider's endpoints: the token endpoint's fault first, if one is set.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		p.mu.Lock()
		fault := p.fault
		p.mu.Unlock()
		if fault != nil && fault(w, r) {
			return
		}
	}
	if strings.HasPrefix(r.URL.Path, ControlPath) {
		http.NotFound(w, r) // the control endpoint is this process's, not the household's
		return
	}
	p.proxy.ServeHTTP(w, r)
}

// Close stops the provider.
func (p *Provider) Close() {
	if p.srv != nil {
		_ = p.srv.Close()
	}
	p.stopServer()
}

func (p *Provider) stopServer() {
	_ = p.stdin.Close()
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.server.Process.Kill()
		<-p.exited
	}
}

// AuthorizationURL, TokenURL and RevocationURL are the provider's endpoints.
func (p *Provider) AuthorizationURL() string { return p.URL + "/authorize" }
func (p *Provider) TokenURL() string         { return p.URL + "/token" }
func (p *Provider) RevocationURL() string    { return p.URL + "/revoke" }

// Counters is what ControlPath answers.
type Counters struct {
	CodeGrants         int64 `json:"code_grants"`
	RefreshGrants      int64 `json:"refresh_grants"`
	Refused            int64 `json:"refused"`
	Revocations        int64 `json:"revocations"`
	ActiveAccessTokens int   `json:"active_access_tokens"`
}

// counters reads the server's counters. The server runs on loopback beside the test: an
// error here is a broken test setup, so it panics (a failed spec under Ginkgo).
func (p *Provider) counters() Counters {
	resp, err := p.client.Get(p.upstream.JoinPath(ControlPath).String())
	if err != nil {
		panic(fmt.Sprintf("oauthprovider: reading the counters: %v", err))
	}
	defer func() { _ = resp.Body.Close() }()
	var c Counters
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != http.StatusOK {
		panic(fmt.Sprintf("oauthprovider: reading the counters: HTTP %d, %v", resp.StatusCode, err))
	}
	return c
}

// CodeGrants counts authorisation codes exchanged, RefreshGrants refresh tokens exchanged,
// Refused the token requests refused (invalid_grant and the like), Revocations the
// revocation requests answered. A faulted request (SetFault) counts in none.
func (p *Provider) CodeGrants() int64    { return p.counters().CodeGrants }
func (p *Provider) RefreshGrants() int64 { return p.counters().RefreshGrants }
func (p *Provider) Refused() int64       { return p.counters().Refused }
func (p *Provider) Revocations() int64   { return p.counters().Revocations }

// ActiveAccessTokens counts the access tokens the provider would accept now.
func (p *Provider) ActiveAccessTokens() int { return p.counters().ActiveAccessTokens }

// SetFault makes the token endpoint call f first: when f answers true it has written the
// response itself (a 503, garbage, a slow answer...). nil removes the fault.
func (p *Provider) SetFault(f func(w http.ResponseWriter, r *http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
}

// RevokeEverything revokes every refresh and access token issued so far, as a household that
// withdraws Flexsite's access at the maker's site: the next refresh is invalid_grant. It
// returns once the server has revoked them.
func (p *Provider) RevokeEverything() {
	resp, err := p.client.Post(p.upstream.JoinPath(ControlPath, "revoke-everything").String(), "", nil)
	if err != nil {
		panic(fmt.Sprintf("oauthprovider: revoking: %v", err))
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		panic(fmt.Sprintf("oauthprovider: revoking: HTTP %d", resp.StatusCode))
	}
}

// Consent plays the household's browser at the provider: it opens the consent page of
// authorizationURL and clicks Allow (allow) or Deny, and answers where the provider sends the
// browser (the client's callback, with code and state or an error).
func Consent(authorizationURL string, allow bool) (string, error) {
	noRedirect := &http.Client{Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(authorizationURL)
	if err != nil {
		return "", err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("consent page: HTTP %d", resp.StatusCode)
	}
	u, err := url.Parse(authorizationURL)
	if err != nil {
		return "", err
	}
	choice := "deny"
	if allow {
		choice = "allow"
	}
	resp, err = noRedirect.PostForm(u.Scheme+"://"+u.Host+"/authorize?"+u.RawQuery, url.Values{"consent": {choice}})
	if err != nil {
		return "", err
	}
	_ = resp.Body.Close()
	loc := resp.Header.Get("Location")
	if loc == "" {
		return "", fmt.Errorf("the provider answered the consent with HTTP %d and no redirect", resp.StatusCode)
	}
	return loc, nil
}

// BinaryEnv names a prebuilt cmd/flexsite-oauth-provider of the test module; without it,
// Start builds one (once per test process) with the go command.
const BinaryEnv = "FLEXSITE_OAUTH_PROVIDER"

var built struct {
	once sync.Once
	path string
	err  error
}

// serverBinary answers $FLEXSITE_OAUTH_PROVIDER, or builds the test module's
// cmd/flexsite-oauth-provider into the user's cache directory. Test processes may build at
// the same time: each writes its own file and renames it into place.
func serverBinary() (string, error) {
	if bin := os.Getenv(BinaryEnv); bin != "" {
		return bin, nil
	}
	built.once.Do(func() { built.path, built.err = build() })
	return built.path, built.err
}

func build() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "flexsite")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "flexsite-oauth-provider")
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, "./cmd/flexsite-oauth-provider")
	cmd.Dir = filepath.Join(root, "test", "browser")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the OAuth provider (go build -C test/browser ./cmd/flexsite-oauth-provider): %w\n%s",
			err, out.String())
	}
	return bin, os.Rename(tmp, bin)
}

// moduleRoot finds the main module's directory above the working directory (a test runs in
// its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/flexsite/flexsite\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("oauthprovider: no github.com/flexsite/flexsite go.mod above the working directory; set " + BinaryEnv)
		}
		dir = parent
	}
}

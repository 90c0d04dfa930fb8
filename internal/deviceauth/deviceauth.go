// Package deviceauth is what the device-connection use cases (internal/app/devices) and the
// DeviceConnection controller share: how a connection's tokens are kept in its Secret (and
// never anywhere else), what phase they put the connection in, and the OAuth 2.0 calls to a
// provider (golang.org/x/oauth2 for the code exchange and the refresh, RFC 7009 for the
// revocation), made only to the addresses the manager's address policy allows.
package deviceauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/identity"
)

// The keys of a connection's token Secret.
const (
	KeyAccessToken  = "access-token"
	KeyRefreshToken = "refresh-token"
	KeyTokenType    = "token-type"
	// KeyExpiry is when the access token expires (RFC 3339; absent: it does not).
	KeyExpiry = "expiry"
	// KeyIssuedAt is when the access token was obtained (RFC 3339).
	KeyIssuedAt    = "issued-at"
	KeyConnectedAt = "connected-at"
	KeyRefreshedAt = "refreshed-at"
	// KeyInvalid, when present, says why the stored tokens can no longer be used.
	KeyInvalid = "invalid"
	// KeyLastError says, in words (never a token), why the last authorisation attempt failed
	// (the provider's exchange); the connection's status repeats it until one succeeds.
	KeyLastError = "last-error"
	// The authorisation in progress: when its state expires, the PKCE verifier and where the
	// household's browser goes back to. The state itself is stored nowhere; its hash is the
	// Secret's flexsite.io/oauth-state label.
	KeyStateExpires = "state-expires"
	KeyVerifier     = "code-verifier"
	KeyRedirectURI  = "redirect-uri"
	// KeyRefreshClaim holds "holder until": the writer that may call the provider with the
	// refresh token now. It is taken with an optimistic write of the Secret (its
	// resourceVersion), so of two writers one loses and never calls.
	KeyRefreshClaim = "refresh-claim"
)

// StateTTL is how long an authorisation's state is valid.
const StateTTL = 10 * time.Minute

// RefreshAt is the share of an access token's lifetime after which it is refreshed.
const RefreshAt = 0.8

// Timeout bounds every call to a provider.
const Timeout = 10 * time.Second

// HashState is the label value stored for a state: a digest, never the state.
func HashState(state string) string {
	sum := sha256.Sum256([]byte("flexsite-oauth-state:" + state))
	return hex.EncodeToString(sum[:])[:62]
}

// Tokens are a connection's stored tokens.
type Tokens struct {
	AccessToken, RefreshToken, TokenType string
	Expiry, IssuedAt, ConnectedAt        time.Time
	RefreshedAt                          time.Time
	Invalid                              string
	// LastError: why the last authorisation attempt failed (words, no token).
	LastError string
}

// Has reports whether tokens are stored.
func (t Tokens) Has() bool { return t.AccessToken != "" || t.RefreshToken != "" }

// Read reads the tokens of a Secret.
func Read(s *corev1.Secret) Tokens {
	if s == nil {
		return Tokens{}
	}
	d := s.Data
	return Tokens{AccessToken: string(d[KeyAccessToken]), RefreshToken: string(d[KeyRefreshToken]),
		TokenType: string(d[KeyTokenType]), Expiry: parseTime(d[KeyExpiry]), IssuedAt: parseTime(d[KeyIssuedAt]),
		ConnectedAt: parseTime(d[KeyConnectedAt]), RefreshedAt: parseTime(d[KeyRefreshedAt]), Invalid: string(d[KeyInvalid]),
		LastError: string(d[KeyLastError])}
}

// Write stores t in the Secret's data (replacing what tokens it held).
func Write(s *corev1.Secret, t Tokens) {
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	set := func(k, v string) {
		if v == "" {
			delete(s.Data, k)
		} else {
			s.Data[k] = []byte(v)
		}
	}
	set(KeyAccessToken, t.AccessToken)
	set(KeyRefreshToken, t.RefreshToken)
	set(KeyTokenType, t.TokenType)
	set(KeyExpiry, formatTime(t.Expiry))
	set(KeyIssuedAt, formatTime(t.IssuedAt))
	set(KeyConnectedAt, formatTime(t.ConnectedAt))
	set(KeyRefreshedAt, formatTime(t.RefreshedAt))
	set(KeyInvalid, t.Invalid)
	set(KeyLastError, t.LastError)
}

// FromOAuth builds stored tokens from a provider's answer, keeping the refresh token when
// the answer has none (a provider that does not rotate).
func FromOAuth(tok *oauth2.Token, previousRefresh string, now time.Time) Tokens {
	t := Tokens{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: tok.TokenType,
		Expiry: tok.Expiry, IssuedAt: now}
	if t.RefreshToken == "" {
		t.RefreshToken = previousRefresh
	}
	return t
}

func parseTime(b []byte) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, string(b))
	return t
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// Phase is the phase the stored tokens put a connection in at now. canRefresh is false for a
// token the client supplied (provider "client"): Flexsite has nowhere to refresh it.
func Phase(t Tokens, now time.Time, canRefresh bool) flexv1.ConnectionPhase {
	switch {
	case t.Invalid != "":
		return flexv1.ConnectionNeedsReauthorisation
	case !t.Has():
		return flexv1.ConnectionPending
	case (t.RefreshToken == "" || !canRefresh) && !t.Expiry.IsZero() && !now.Before(t.Expiry):
		return flexv1.ConnectionNeedsReauthorisation
	}
	return flexv1.ConnectionConnected
}

// DueAt is when the access token should be refreshed (zero: never: no expiry or nothing to
// refresh it with).
func DueAt(t Tokens) time.Time {
	if t.RefreshToken == "" || t.Expiry.IsZero() || t.Invalid != "" {
		return time.Time{}
	}
	issued := t.IssuedAt
	if issued.IsZero() || !issued.Before(t.Expiry) {
		return t.Expiry.Add(-time.Minute)
	}
	life := t.Expiry.Sub(issued)
	return issued.Add(time.Duration(float64(life) * RefreshAt))
}

// Status sets the connection's phase and times from its tokens.
func Status(conn *flexv1.DeviceConnection, t Tokens, now time.Time) {
	conn.Status.Phase = Phase(t, now, conn.Spec.Provider != flexv1.ClientProvider)
	conn.Status.ConnectedAt = metaTime(t.ConnectedAt)
	conn.Status.ExpiresAt = metaTime(t.Expiry)
	conn.Status.LastRefreshAt = metaTime(t.RefreshedAt)
}

func metaTime(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	m := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &m
}

// NewSecret is the token Secret of conn, owned by it.
func NewSecret(conn *flexv1.DeviceConnection) *corev1.Secret {
	t := true
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: conn.Namespace, Name: identity.DeviceTokensSecretName(conn.Name),
		Labels: map[string]string{flexv1.DeviceConnectionLabel: "true"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: flexv1.GroupVersion.String(), Kind: "DeviceConnection",
			Name: conn.Name, UID: conn.UID, Controller: &t, BlockOwnerDeletion: &t}},
	}, Type: corev1.SecretTypeOpaque}
}

// SecretKey is the key of conn's token Secret.
func SecretKey(conn *flexv1.DeviceConnection) types.NamespacedName {
	return types.NamespacedName{Namespace: conn.Namespace, Name: identity.DeviceTokensSecretName(conn.Name)}
}

// ErrInvalidGrant is a provider's invalid_grant (RFC 6749 §5.2): the grant is revoked,
// expired or rotated away, and only the household can give a new one.
var ErrInvalidGrant = errors.New("the provider refused the grant (invalid_grant)")

// Provider is a DeviceProvider ready to be called.
type Provider struct {
	Spec   flexv1.DeviceProviderSpec
	Name   string
	secret string
	http   *http.Client
}

// Dialer holds what outbound calls to providers may reach, and the HTTP clients that make
// them. Pooled gives it one client per provider, kept for the life of the process, so that
// the calls to a provider reuse their connections (and TLS sessions); every copy of a pooled
// Dialer shares its clients.
type Dialer struct {
	Policy events.AddressPolicy
	// SecretNamespace is the manager's namespace, where the providers' client secrets are.
	SecretNamespace string

	clients *clientPool
}

// clientPool is one *http.Client per provider name, made on first use; safe for concurrent
// use. The clients dial with the policy the pool was made with.
type clientPool struct {
	mu      sync.Mutex
	dialer  Dialer
	clients map[string]*http.Client
}

// Pooled answers d holding a pool of HTTP clients, one per provider, if it has none yet. The
// users of a Dialer (the DeviceConnection controller, the device-connection use cases) call
// it once when they are set up; a Dialer used without it makes a client per Load, and so a
// connection per call.
func (d Dialer) Pooled() Dialer {
	if d.clients == nil {
		d.clients = &clientPool{dialer: Dialer{Policy: d.Policy}, clients: map[string]*http.Client{}}
	}
	return d
}

// client is the provider's HTTP client: the pooled one, or a new one when d is not pooled.
func (d Dialer) client(provider string) *http.Client {
	if d.clients == nil {
		return d.httpClient()
	}
	pool := d.clients
	pool.mu.Lock()
	defer pool.mu.Unlock()
	c, ok := pool.clients[provider]
	if !ok {
		c = pool.dialer.httpClient()
		pool.clients[provider] = c
	}
	return c
}

// loopbackAllowed reports whether the policy allows loopback (make run, tests): then, and
// only for a loopback host, a provider may be http://.
func (d Dialer) loopbackAllowed() bool {
	return d.Policy.Check(netip.MustParseAddr("127.0.0.1")) == nil
}

// CheckURL answers why a provider URL may not be called, or nil.
func (d Dialer) CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("provider URL %q is not an absolute URL", raw)
	}
	switch u.Scheme {
	case "https":
	case "http":
		addr, err := netip.ParseAddr(u.Hostname())
		if (err != nil || !addr.IsLoopback()) && u.Hostname() != "localhost" || !d.loopbackAllowed() {
			return fmt.Errorf("provider URL %q must be https (http only to a loopback provider the manager allows)", raw)
		}
	default:
		return fmt.Errorf("provider URL %q must be https", raw)
	}
	return d.Policy.CheckURLHost(raw)
}

// ErrUnreadable is a provider's configuration that could not be read just now (the API server
// did not answer): try again, unlike a provider that is missing or misconfigured.
var ErrUnreadable = errors.New("device provider configuration unreadable")

// Load reads the DeviceProvider name and its client secret (the Secret through c, which
// reads Secrets from the API server). A provider that does not exist is (nil, nil); a read
// that failed for another reason than the object's absence is ErrUnreadable.
func (d Dialer) Load(ctx context.Context, c client.Reader, name string) (*Provider, error) {
	dp := &flexv1.DeviceProvider{}
	if err := c.Get(ctx, types.NamespacedName{Name: name}, dp); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("%w: reading provider %s: %w", ErrUnreadable, name, err)
	}
	p, err := d.provider(name, dp.Spec)
	if err != nil {
		return nil, err
	}
	if ref := dp.Spec.ClientSecretRef; ref.Name != "" {
		s := &corev1.Secret{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: d.SecretNamespace, Name: ref.Name}, s); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
				return nil, fmt.Errorf("reading the client secret of provider %s: %w", name, err)
			}
			return nil, fmt.Errorf("%w: the client secret of provider %s: %w", ErrUnreadable, name, err)
		}
		key := ref.Key
		if key == "" {
			key = "client-secret"
		}
		p.secret = string(s.Data[key])
	}
	return p, nil
}

// provider is the provider name of spec (without its client secret), calling through the
// provider's client, once its URLs are found callable.
func (d Dialer) provider(name string, spec flexv1.DeviceProviderSpec) (*Provider, error) {
	for _, raw := range []string{spec.AuthorizationURL, spec.TokenURL, spec.RevocationURL} {
		if raw == "" {
			continue
		}
		if err := d.CheckURL(raw); err != nil {
			return nil, err
		}
	}
	return &Provider{Spec: spec, Name: name, http: d.client(name)}, nil
}

// httpClient is a new client that dials only what the policy allows (the resolved address,
// at connect time), without proxy or redirects, and gives up after Timeout. It keeps a few
// idle connections alive for the next call (a refresh every few minutes or hours per
// connection, many connections per provider).
func (d Dialer) httpClient() *http.Client {
	dialer := &net.Dialer{Timeout: Timeout, Control: d.Policy.Control}
	return &http.Client{Timeout: Timeout, Transport: &http.Transport{Proxy: nil, DialContext: dialer.DialContext,
		TLSHandshakeTimeout: Timeout, ResponseHeaderTimeout: Timeout,
		MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second, ForceAttemptHTTP2: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Config is the provider's OAuth 2.0 configuration, sending the household back to redirectURL.
func (p *Provider) Config(redirectURL string) *oauth2.Config {
	return &oauth2.Config{ClientID: p.Spec.ClientID, ClientSecret: p.secret, RedirectURL: redirectURL,
		Scopes: p.Spec.Scopes, Endpoint: oauth2.Endpoint{AuthURL: p.Spec.AuthorizationURL, TokenURL: p.Spec.TokenURL,
			AuthStyle: oauth2.AuthStyleInParams}}
}

func (p *Provider) ctx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, p.http)
}

// AuthCodeURL is the authorisation URL for state, with the PKCE S256 challenge of verifier.
func (p *Provider) AuthCodeURL(redirectURL, state, verifier string) string {
	return p.Config(redirectURL).AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))
}

// Exchange trades a code for tokens with the PKCE verifier.
func (p *Provider) Exchange(ctx context.Context, redirectURL, code, verifier string) (*oauth2.Token, error) {
	tok, err := p.Config(redirectURL).Exchange(p.ctx(ctx), code, oauth2.VerifierOption(verifier))
	return tok, classify(err)
}

// Refresh trades the refresh token for new tokens (the provider may rotate the refresh token).
func (p *Provider) Refresh(ctx context.Context, refreshToken string) (*oauth2.Token, error) {
	src := p.Config("").TokenSource(p.ctx(ctx), &oauth2.Token{RefreshToken: refreshToken, Expiry: time.Unix(1, 0)})
	tok, err := src.Token()
	return tok, classify(err)
}

// classify tells invalid_grant (ErrInvalidGrant) from the other failures, and keeps the
// provider's answer out of the error: it may echo what was sent.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode == "invalid_grant" {
			return ErrInvalidGrant
		}
		code := re.ErrorCode
		if code == "" {
			code = "no error code"
		}
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return fmt.Errorf("the provider answered HTTP %d (%s)", status, sanitize(code))
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errors.New("the provider did not answer in time")
	}
	if strings.Contains(err.Error(), "refused") {
		return errors.New("the provider refused the connection or its address is not allowed")
	}
	return errors.New("the provider's answer could not be used")
}

func sanitize(s string) string {
	if len(s) > 40 {
		s = s[:40]
	}
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return -1
	}, s)
}

// Revoke revokes token at the provider's revocation URL (RFC 7009); nothing without one.
func (p *Provider) Revoke(ctx context.Context, token, hint string) error {
	if p.Spec.RevocationURL == "" || token == "" {
		return nil
	}
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Spec.RevocationURL, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(p.Spec.ClientID), url.QueryEscape(p.secret))
	resp, err := p.http.Do(req)
	if err != nil {
		return classify(err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the provider answered the revocation with HTTP %d", resp.StatusCode)
	}
	return nil
}

// RevokeAll revokes a connection's stored tokens (the refresh token first: it revokes the
// grant at most providers).
func (p *Provider) RevokeAll(ctx context.Context, t Tokens) error {
	if err := p.Revoke(ctx, t.RefreshToken, "refresh_token"); err != nil {
		return err
	}
	return p.Revoke(ctx, t.AccessToken, "access_token")
}

// NewState is a fresh opaque state (32 random bytes).
func NewState() string { return oauth2.GenerateVerifier() }

// ProviderOfModel is the provider of the catalogue's model named model ("" when none): the
// AssetModel whose object name sorts first wins, as in eligibility.
func ProviderOfModel(models []flexv1.AssetModel, model string) string {
	if model == "" {
		return ""
	}
	best, prov := "", ""
	for _, m := range models {
		if m.Spec.ModelName == model && (best == "" || m.Name < best) {
			best, prov = m.Name, m.Spec.Provider
		}
	}
	return prov
}

// Lapsed reports whether a connection's phase asks the household to act.
func Lapsed(conn *flexv1.DeviceConnection) bool {
	return conn.DeletionTimestamp.IsZero() && (conn.Status.Phase == flexv1.ConnectionNeedsReauthorisation ||
		conn.Status.Phase == flexv1.ConnectionRevoked)
}

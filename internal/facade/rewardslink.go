package facade

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
)

// The rewards link (GET /rewards/{site_id}/url/balance) opens the hosted rewards page
// (rewardspage.go) for one site. What the link and its session are lives in a Secret of the
// manager's namespace (Config.HostedNamespace), one per link, so that it survives a restart
// and every replica sees it; the Secret holds only hashes of the secrets the household's
// browser carries:
//   - the link's one-time code (in the URL): the Secret is named after its SHA-256, and the
//     full hash is compared in constant time. Redeeming it marks the link used (an update at
//     the version read: of two concurrent redemptions one wins) and starts a session;
//   - the session secret (in an HttpOnly, SameSite=Lax cookie, path /hosted/rewards), hashed;
//     the forms' CSRF token is an HMAC of it, so it needs no storage;
//   - the emailed six-digit code, hashed with the link's key, single use, expiring, with a
//     bounded number of tries and of sends.
//
// Link Secrets live in the manager's namespace only (a namespaced Role). Bank details live in
// the organisations' namespaces: the ClusterRole adds create and update on Secrets to the list
// and watch it has, and the code reads bank details only by listing with their label (no get,
// as for the credentials), and writes only Secrets it names flexsite-bank-<site id>.
// +kubebuilder:rbac:groups="",namespace=flexsite-system,resources=secrets,verbs=get;list;create;update;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create;update
// +kubebuilder:rbac:groups=flexsite.io,resources=rewardledgers,verbs=get;update

// Rewards link lifetimes and bounds.
const (
	// RewardsLinkTTL is how long a link may be redeemed.
	RewardsLinkTTL = 15 * time.Minute
	// RewardsSessionTTL is how long the page works after the link was redeemed.
	RewardsSessionTTL = 30 * time.Minute
	// RewardsCodeTTL is how long an emailed code is good for.
	RewardsCodeTTL = 10 * time.Minute
	// rewardsCodeTries is how many wrong codes void the code sent.
	rewardsCodeTries = 5
	// rewardsCodeSends is how many codes one link may send, and rewardsCodeInterval how long
	// it waits between two.
	rewardsCodeSends    = 5
	rewardsCodeInterval = 30 * time.Second
)

// Names of the rewards link's objects.
const (
	// RewardsLinkLabel marks the Secrets that hold rewards links.
	RewardsLinkLabel = "flexsite.io/rewards-link"
	// RewardsLinkSecretPrefix starts a link Secret's name; the rest is the link's key.
	RewardsLinkSecretPrefix = "flexsite-rewards-link-"
	// BankDetailsSecretPrefix starts the name of the Secret, in the organisation's namespace,
	// that holds a site's bank details; the rest is the site's id.
	BankDetailsSecretPrefix = "flexsite-bank-"
	// BankDetailsLabel, on a bank details Secret, holds the id of the site whose they are.
	BankDetailsLabel = "flexsite.io/bank-details-of"
	// rewardsCookie carries the session: the link's key, a dot, the session secret.
	rewardsCookie = "flexsite_rewards"
	// DefaultHostedNamespace is where link Secrets live unless Config.HostedNamespace says.
	DefaultHostedNamespace = "flexsite-system"
	// maxRedirectURI bounds redirect_uri.
	maxRedirectURI = 2048
	// rewardsLinkMarked is the value of RewardsLinkLabel.
	rewardsLinkMarked = "true"
	// fieldCode is the form field (and the path segment) of the emailed code.
	fieldCode = "code"
)

// URL schemes of origins and links.
const (
	schemeHTTP  = "http"
	schemeHTTPS = "https"
)

// BalanceURLResponse answers GET /rewards/{site_id}/url/balance.
type BalanceURLResponse struct {
	BalanceWithdrawalURL string `json:"balance_withdrawal_url"`
	URLExpiryTimestamp   string `json:"url_expiry_timestamp"`
}

// rewardsLink is a link's state, as its Secret stores it (JSON, key "state").
type rewardsLink struct {
	LinkHash         string    `json:"link_hash"`
	Namespace        string    `json:"namespace"`
	ClientName       string    `json:"client"`
	SiteName         string    `json:"site_name"`
	SiteID           string    `json:"site_id"`
	RedirectURI      string    `json:"redirect_uri"`
	TwoFactor        bool      `json:"two_factor"`
	HideTransactions bool      `json:"hide_transactions"`
	AutoSetup        bool      `json:"auto_redirect_to_setup"`
	Expires          time.Time `json:"expires"`

	Redeemed       bool      `json:"redeemed"`
	SessionHash    string    `json:"session_hash,omitempty"`
	SessionExpires time.Time `json:"session_expires,omitzero"`
	Finished       bool      `json:"finished,omitempty"`

	Verified    bool      `json:"verified,omitempty"`
	CodeHash    string    `json:"code_hash,omitempty"`
	CodeExpires time.Time `json:"code_expires,omitzero"`
	CodeTries   int       `json:"code_tries,omitempty"`
	CodesSent   int       `json:"codes_sent,omitempty"`
	LastCodeAt  time.Time `json:"last_code_at,omitzero"`

	// Flash is a one-time notice shown by the next page view (POST-redirect-GET).
	Flash string `json:"flash,omitempty"`
}

func sha256Hex(parts ...string) string {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// linkKey names a link's Secret: a prefix of its code's hash.
func linkKey(code string) string { return sha256Hex(code)[:40] }

func equalHash(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// csrfToken is the forms' token for a session: an HMAC of the session secret.
func csrfToken(session string) string {
	m := hmac.New(sha256.New, []byte(session))
	m.Write([]byte("flexsite-rewards-csrf"))
	return hex.EncodeToString(m.Sum(nil))
}

func (s *Server) hostedNamespace() string {
	if s.HostedNamespace != "" {
		return s.HostedNamespace
	}
	return DefaultHostedNamespace
}

// parseRedirectURI accepts an absolute http(s) URL without credentials.
func parseRedirectURI(raw string) (*url.URL, bool) {
	if raw == "" || len(raw) > maxRedirectURI || strings.ContainsAny(raw, " \t\r\n") {
		return nil, false
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != schemeHTTPS && u.Scheme != schemeHTTP) || u.Host == "" || u.User != nil {
		return nil, false
	}
	return u, true
}

// queryBool reads an optional boolean query parameter (nil when absent).
func (f *fields) queryBool(q url.Values, key string) *bool {
	raw, ok := q[key]
	if !ok || len(raw) == 0 || raw[0] == "" {
		return nil
	}
	switch strings.ToLower(raw[0]) {
	case rewardsLinkMarked, "1", "yes", "on":
		v := true
		return &v
	case "false", "0", "no", "off":
		v := false
		return &v
	}
	f.add("Input should be a valid boolean, unable to interpret input", "bool_parsing", []any{"query", key})
	return nil
}

// balanceURL answers GET /rewards/{site_id}/url/balance: a one-time link to the hosted
// rewards page of the site.
func (s *Server) balanceURL(r *http.Request, p *auth.Principal) (any, error) {
	q := r.URL.Query()
	f := &fields{}
	redirect := q.Get("redirect_uri")
	switch _, ok := parseRedirectURI(redirect); {
	case redirect == "":
		f.add("Field required", "missing", []any{"query", "redirect_uri"})
	case !ok:
		f.add("Input should be an absolute http(s) URL", "url_parsing", []any{"query", "redirect_uri"})
	}
	twoFactor := f.queryBool(q, "enforce_two_factor_auth")
	hide := f.queryBool(q, "hide_transactions")
	auto := f.queryBool(q, "auto_redirect_to_setup")
	if err := f.err(); err != nil {
		return nil, err
	}
	site, err := s.siteToRead(r, p)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	if twoFactor == nil {
		apiClient := &flexv1.APIClient{}
		if err := s.Cache.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.ClientName}, apiClient); err != nil {
			return nil, err
		}
		twoFactor = &apiClient.Spec.RewardsTwoFactor
	}
	now := s.Now()
	code := rand.Text()
	link := rewardsLink{
		LinkHash: sha256Hex(code), Namespace: site.Namespace, ClientName: p.ClientName, SiteName: site.Name,
		SiteID: site.Labels[flexv1.IDLabel], RedirectURI: redirect, TwoFactor: *twoFactor,
		HideTransactions: hide != nil && *hide, AutoSetup: auto != nil && *auto, Expires: now.Add(RewardsLinkTTL),
	}
	data, err := json.Marshal(link)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.hostedNamespace(), Name: RewardsLinkSecretPrefix + linkKey(code),
			Labels: map[string]string{RewardsLinkLabel: rewardsLinkMarked}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"state": data},
	}
	if err := s.Client.Create(ctx, secret); err != nil {
		return nil, err
	}
	s.sweepRewardsLinks(ctx, now)
	return BalanceURLResponse{
		BalanceWithdrawalURL: s.publicBase(r) + "/hosted/rewards/link/" + code,
		URLExpiryTimestamp:   link.Expires.UTC().Format(time.RFC3339),
	}, nil
}

// publicBase is the scheme and host the links point at: Config.PublicURL, else the request's.
func (s *Server) publicBase(r *http.Request) string {
	if s.PublicURL != "" {
		return strings.TrimSuffix(s.PublicURL, "/")
	}
	scheme := schemeHTTP
	if r.TLS != nil {
		scheme = schemeHTTPS
	}
	return scheme + "://" + r.Host
}

// sweepRewardsLinks deletes the link Secrets nobody can use any more (best effort: a link
// issued is a moment to tidy, so they do not pile up).
func (s *Server) sweepRewardsLinks(ctx context.Context, now time.Time) {
	list := &corev1.SecretList{}
	if err := s.APIReader.List(ctx, list, client.InNamespace(s.hostedNamespace()),
		client.MatchingLabels{RewardsLinkLabel: rewardsLinkMarked}); err != nil {
		s.Log.Error(err, "listing rewards links")
		return
	}
	for i := range list.Items {
		link, err := decodeLink(&list.Items[i])
		if err == nil && !link.dead(now) {
			continue
		}
		if err := s.Client.Delete(ctx, &list.Items[i], client.Preconditions{ResourceVersion: &list.Items[i].ResourceVersion}); err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			s.Log.Error(err, "deleting a spent rewards link")
		}
	}
}

// dead reports whether nobody can use the link any more.
func (l *rewardsLink) dead(now time.Time) bool {
	if !l.Redeemed {
		return now.After(l.Expires)
	}
	return l.Finished || now.After(l.SessionExpires)
}

func decodeLink(secret *corev1.Secret) (*rewardsLink, error) {
	link := &rewardsLink{}
	if err := json.Unmarshal(secret.Data["state"], link); err != nil {
		return nil, fmt.Errorf("rewards link %s: %w", secret.Name, err)
	}
	return link, nil
}

// errNoLink is a link or session that does not exist (or whose secret does not match).
var errNoLink = errors.New("no such rewards link")

// loadLink reads a link's Secret by key from the API server (not the cache: a link is used
// right after it was made, perhaps on another replica).
func (s *Server) loadLink(ctx context.Context, key string) (*corev1.Secret, *rewardsLink, error) {
	if len(key) != 40 || strings.Trim(key, "0123456789abcdef") != "" {
		return nil, nil, errNoLink
	}
	secret := &corev1.Secret{}
	err := s.APIReader.Get(ctx, client.ObjectKey{Namespace: s.hostedNamespace(), Name: RewardsLinkSecretPrefix + key}, secret)
	if apierrors.IsNotFound(err) {
		return nil, nil, errNoLink
	}
	if err != nil {
		return nil, nil, err
	}
	link, err := decodeLink(secret)
	if err != nil {
		return nil, nil, err
	}
	return secret, link, nil
}

// saveLink writes a link's state at the version read: a conflict means another request of
// the same session (or a second redemption) came first.
func (s *Server) saveLink(ctx context.Context, secret *corev1.Secret, link *rewardsLink) error {
	data, err := json.Marshal(link)
	if err != nil {
		return err
	}
	secret.Data = map[string][]byte{"state": data}
	return s.Client.Update(ctx, secret)
}

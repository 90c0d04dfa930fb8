// Package devices holds the use cases of a household's device connections
// (docs/api.md, "Device connections"): starting an authorisation at a maker's cloud (initiate), its
// return (the callback that exchanges the code), a token the API client obtained itself, the
// connections of a site and disconnecting one. The tokens live only in a Secret owned by the
// connection (internal/deviceauth); the DeviceConnection controller keeps them alive. It
// speaks no HTTP.
package devices

import (
	"context"
	"errors"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kretry "k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/deviceauth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/validation"
)

// Config wires the device-connection use cases.
type Config struct {
	Log logr.Logger
	// Households finds the caller's site (who reaches which site is its rule).
	Households *app.Service
	// Dialer says which providers may be called, and holds their client secrets' namespace.
	Dialer deviceauth.Dialer
	Now    func() time.Time
}

// Service runs the device-connection use cases.
type Service struct {
	Config
	cache, apiReader client.Reader
	client           client.Client
}

// New builds the use cases on the household use cases' readers and writer.
func New(cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	// One HTTP client per provider for every call the use cases make (connections reused).
	cfg.Dialer = cfg.Dialer.Pooled()
	return &Service{Config: cfg, cache: cfg.Households.Cache, apiReader: cfg.Households.APIReader,
		client: cfg.Households.Client}
}

// ErrProviderUnknown answers a provider that is not in the catalogue (prod's 400).
var ErrProviderUnknown = app.Fail(app.BadRequest, "Unsupported OAuth provider or not configured")

// ErrConnectionNotFound answers a site with no connection at that provider.
var ErrConnectionNotFound = app.Fail(app.NotFound, "Connection not found")

// InitiateInput starts an authorisation.
type InitiateInput struct {
	SiteID, Provider string
	// RedirectURI is where the household's browser goes after the callback ("" : a plain
	// Flexsite page).
	RedirectURI string
	// CallbackURL is Flexsite's own callback (the door knows its public address).
	CallbackURL string
}

// InitiateResult is prod's OAuthInitiateResponse.
type InitiateResult struct {
	AuthorizationURL string `json:"authorization_url"`
}

// Initiate answers the provider's authorisation URL for the caller's site, with a fresh
// single-use state (stored only hashed, valid StateTTL) and the PKCE S256 challenge (the
// verifier is kept in the connection's token Secret, never in a CR).
func (s *Service) Initiate(ctx context.Context, p *auth.Principal, in InitiateInput) (InitiateResult, error) {
	site, err := s.Households.SiteToRead(ctx, p, in.SiteID)
	if err != nil {
		return InitiateResult{}, err
	}
	redirect, err := s.checkRedirect(ctx, p, in.RedirectURI)
	if err != nil {
		return InitiateResult{}, err
	}
	prov, err := s.provider(ctx, in.Provider)
	if err != nil {
		return InitiateResult{}, err
	}
	conn, err := s.ensureConnection(ctx, site, in.Provider)
	if err != nil {
		return InitiateResult{}, err
	}
	state, verifier := deviceauth.NewState(), deviceauth.NewState()
	hash := deviceauth.HashState(state)
	expires := s.Now().Add(deviceauth.StateTTL)
	err = s.updateSecret(ctx, conn, func(sec *corev1.Secret) {
		sec.Labels[flexv1.OAuthStateLabel] = hash
		sec.Data[deviceauth.KeyStateExpires] = []byte(expires.UTC().Format(time.RFC3339Nano))
		sec.Data[deviceauth.KeyVerifier] = []byte(verifier)
		if redirect == "" {
			delete(sec.Data, deviceauth.KeyRedirectURI)
		} else {
			sec.Data[deviceauth.KeyRedirectURI] = []byte(redirect)
		}
	})
	if err != nil {
		return InitiateResult{}, err
	}
	if err := s.markState(ctx, conn, hash); err != nil {
		return InitiateResult{}, err
	}
	return InitiateResult{AuthorizationURL: prov.AuthCodeURL(in.CallbackURL, state, verifier)}, nil
}

// markState puts the state's hash on the connection, where the callback finds it in the cache
// (Lookup.DeviceConnectionsByOAuthState), and waits (briefly) for the cache to see it: the household's browser
// may come back at once.
func (s *Service) markState(ctx context.Context, conn *flexv1.DeviceConnection, hash string) error {
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+flexv1.OAuthStateAnnotation+`":"`+
		hash+`"}}}`))
	if err := s.client.Patch(ctx, conn.DeepCopy(), patch); err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, cacheWait)
	defer cancel()
	tick := time.NewTicker(cachePoll)
	defer tick.Stop()
	for {
		found, err := index.NewLookup(s.cache).DeviceConnectionsByOAuthState(wait, hash)
		if err != nil || len(found) > 0 {
			return nil // found; or the cache cannot answer, and the callback will fail the same way
		}
		select {
		case <-wait.Done():
			return nil // the cache is slow: the callback, a human's round trip away, will likely find it
		case <-tick.C:
		}
	}
}

// How long Initiate waits for the cache to see a state's hash, and how often it looks.
const (
	cacheWait = 5 * time.Second
	cachePoll = 2 * time.Millisecond
)

// checkRedirect normalises a redirect URI (app.RedirectURI: https, or a private-use scheme the
// API client declares) and checks it is registered for the caller: one of its API client's
// redirectURIs, or, for a household's token, on its allowed origin.
func (s *Service) checkRedirect(ctx context.Context, p *auth.Principal, raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	norm, err := app.RedirectURI(ctx, s.cache, p, raw)
	if err != nil {
		return "", err
	}
	if p.Kind == auth.KindEndUser && p.AllowedOrigin != "" && validation.Origin(norm) == p.AllowedOrigin {
		return norm, nil
	}
	cl := &flexv1.APIClient{}
	if err := s.cache.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.ClientName}, cl); err != nil {
		if apierrors.IsNotFound(err) {
			return "", notRegistered()
		}
		return "", err
	}
	for _, u := range cl.Spec.RedirectURIs {
		if n, err := validation.RedirectURI(u, cl.Spec.RedirectSchemes); err == nil && n == norm {
			return norm, nil
		}
	}
	return "", notRegistered()
}

func notRegistered() error {
	return app.InvalidFields(app.Field("redirect_uri is not one of the API client's registered redirect URIs",
		"value_error", "query", "redirect_uri"))
}

// errProviderUnreadable answers a provider whose configuration could not be read just now (the
// API server did not answer): a dependency down, so the caller retries, rather than told that
// the provider is not configured.
func (s *Service) errProviderUnreadable(err error) error {
	s.Log.Info("provider unreadable", "reason", err.Error())
	return &app.Error{Kind: app.Unavailable, Detail: "The device provider could not be read; retry", RetryAfter: "1"}
}

// provider loads a provider of the catalogue: unknown (or "client") is prod's 400; one whose
// URLs the address policy refuses is not configured either.
func (s *Service) provider(ctx context.Context, name string) (*deviceauth.Provider, error) {
	if name == flexv1.ClientProvider || !validation.ProviderName(name) {
		return nil, ErrProviderUnknown
	}
	prov, err := s.Dialer.Load(ctx, s.apiReader, name)
	if errors.Is(err, deviceauth.ErrUnreadable) {
		return nil, s.errProviderUnreadable(err)
	}
	if err != nil {
		s.Log.Info("provider not usable", "provider", name, "reason", err.Error())
		return nil, ErrProviderUnknown
	}
	if prov == nil {
		return nil, ErrProviderUnknown
	}
	return prov, nil
}

// ensureConnection gets or creates the site's connection at provider.
func (s *Service) ensureConnection(ctx context.Context, site *flexv1.Site, provider string) (*flexv1.DeviceConnection, error) {
	key := types.NamespacedName{Namespace: site.Namespace, Name: identity.DeviceConnectionName(site.Name, provider)}
	conn := &flexv1.DeviceConnection{}
	err := s.apiReader.Get(ctx, key, conn)
	switch {
	case err == nil && conn.DeletionTimestamp.IsZero():
		return conn, nil
	case err == nil:
		return nil, &app.Error{Kind: app.Unavailable, Detail: "The previous connection is being removed; retry", RetryAfter: "1"}
	case !apierrors.IsNotFound(err):
		return nil, err
	}
	conn = household.NewDeviceConnection(site, provider) // its site its controller from the create
	if err := s.client.Create(ctx, conn); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return conn, s.apiReader.Get(ctx, key, conn)
		}
		return nil, err
	}
	return conn, nil
}

// updateSecret applies change to the connection's token Secret (created when missing), with
// optimistic concurrency, retried on a conflict from a fresh read.
func (s *Service) updateSecret(ctx context.Context, conn *flexv1.DeviceConnection, change func(*corev1.Secret)) error {
	return kretry.RetryOnConflict(kretry.DefaultRetry, func() error {
		sec := &corev1.Secret{}
		err := s.client.Get(ctx, deviceauth.SecretKey(conn), sec)
		create := apierrors.IsNotFound(err)
		switch {
		case create:
			sec = deviceauth.NewSecret(conn)
		case err != nil:
			return err
		}
		if sec.Labels == nil {
			sec.Labels = map[string]string{}
		}
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		change(sec)
		if create {
			err = s.client.Create(ctx, sec)
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("secrets"), sec.Name, err)
			}
			return err
		}
		return s.client.Update(ctx, sec)
	})
}

// setStatus writes the connection's phase and times from the tokens just stored (the
// controller computes the same from the Secret, and its conditions).
func (s *Service) setStatus(ctx context.Context, conn *flexv1.DeviceConnection, t deviceauth.Tokens) error {
	return kretry.RetryOnConflict(kretry.DefaultRetry, func() error {
		fresh := &flexv1.DeviceConnection{}
		if err := s.apiReader.Get(ctx, client.ObjectKeyFromObject(conn), fresh); err != nil {
			return err
		}
		base := fresh.DeepCopy()
		deviceauth.Status(fresh, t, s.Now())
		return s.client.Status().Patch(ctx, fresh, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
}

// touch asks the controller to look at the connection again (its status follows the Secret,
// which it does not watch).
func (s *Service) touch(ctx context.Context, conn *flexv1.DeviceConnection) error {
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+flexv1.TokensChangedAnnotation+`":"`+
		s.Now().UTC().Format(time.RFC3339Nano)+`"}}}`))
	return client.IgnoreNotFound(s.client.Patch(ctx, conn.DeepCopy(), patch))
}

// CallbackInput is the provider's answer, relayed by the household's browser.
type CallbackInput struct {
	State, Code, Error string
	CallbackURL        string
}

// Callback outcomes' reasons.
const (
	ReasonInvalidState   = "invalid_state"
	ReasonExpiredState   = "expired_state"
	ReasonAccessDenied   = "access_denied"
	ReasonProviderError  = "provider_error"
	ReasonExchangeFailed = "exchange_failed"
)

// CallbackResult says where the browser goes and what happened.
type CallbackResult struct {
	// RedirectURI given at initiate ("" : none; the door shows its own page).
	RedirectURI string
	Provider    string
	// DisplayName of the provider, for the plain page.
	DisplayName string
	Connected   bool
	// Reason of a failure (one of the Reason... codes); Message says it in words.
	Reason, Message string
}

// Callback finishes an authorisation: the state is consumed (single use: a second use finds
// nothing), then the code is exchanged with the PKCE verifier and the tokens stored. A bad,
// reused or expired state, a refusal or a failed exchange stores nothing.
func (s *Service) Callback(ctx context.Context, in CallbackInput) (CallbackResult, error) {
	bad := CallbackResult{Reason: ReasonInvalidState,
		Message: "This authorisation link is not valid or was already used. Start again from the app."}
	if in.State == "" || len(in.State) > 512 {
		return bad, nil
	}
	// The connection by its state's hash from the cache (an unknown state costs no API-server
	// call), then its one Secret, whose label is the proof.
	hash := deviceauth.HashState(in.State)
	conns, err := index.NewLookup(s.cache).DeviceConnectionsByOAuthState(ctx, hash)
	if err != nil {
		return CallbackResult{}, err
	}
	if len(conns) != 1 {
		return bad, nil
	}
	sec := &corev1.Secret{}
	if err := s.client.Get(ctx, deviceauth.SecretKey(conns[0]), sec); err != nil {
		if apierrors.IsNotFound(err) {
			return bad, nil
		}
		return CallbackResult{}, err
	}
	if sec.Labels[flexv1.OAuthStateLabel] != hash {
		return bad, nil
	}
	verifier := string(sec.Data[deviceauth.KeyVerifier])
	redirect := string(sec.Data[deviceauth.KeyRedirectURI])
	expires, _ := time.Parse(time.RFC3339Nano, string(sec.Data[deviceauth.KeyStateExpires]))
	// Consume the state: whoever writes first wins; the other finds a conflict.
	delete(sec.Labels, flexv1.OAuthStateLabel)
	for _, k := range []string{deviceauth.KeyVerifier, deviceauth.KeyRedirectURI, deviceauth.KeyStateExpires} {
		delete(sec.Data, k)
	}
	if err := s.client.Update(ctx, sec); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return bad, nil
		}
		return CallbackResult{}, err
	}
	owner := metav1.GetControllerOf(sec)
	if owner == nil || owner.Kind != "DeviceConnection" {
		return bad, nil
	}
	conn := &flexv1.DeviceConnection{}
	if err := s.apiReader.Get(ctx, types.NamespacedName{Namespace: sec.Namespace, Name: owner.Name}, conn); err != nil {
		if apierrors.IsNotFound(err) {
			return bad, nil
		}
		return CallbackResult{}, err
	}
	if !conn.DeletionTimestamp.IsZero() || conn.UID != owner.UID {
		return bad, nil // disconnected (or its site offboarded) meanwhile: nothing is stored
	}
	out := CallbackResult{RedirectURI: redirect, Provider: conn.Spec.Provider, DisplayName: conn.Spec.Provider}
	if !s.Now().Before(expires) {
		out.Reason, out.Message = ReasonExpiredState, "This authorisation took too long (more than 10 minutes). Start again from the app."
		return out, nil
	}
	prov, err := s.Dialer.Load(ctx, s.apiReader, conn.Spec.Provider)
	if errors.Is(err, deviceauth.ErrUnreadable) {
		return out, s.errProviderUnreadable(err) // the state and the code stay good: the same callback again
	}
	if err != nil || prov == nil {
		out.Reason, out.Message = ReasonProviderError, "This provider is not available any more."
		return out, nil
	}
	out.DisplayName = prov.Spec.DisplayName
	if in.Error != "" {
		if in.Error == "access_denied" {
			out.Reason, out.Message = ReasonAccessDenied, "You did not allow access at "+prov.Spec.DisplayName+". Nothing was connected."
		} else {
			out.Reason, out.Message = ReasonProviderError, prov.Spec.DisplayName+" could not complete the authorisation. Nothing was connected."
		}
		return out, nil
	}
	if in.Code == "" {
		return bad, nil
	}
	tok, err := prov.Exchange(ctx, in.CallbackURL, in.Code, verifier)
	if err != nil {
		s.Log.Info("code exchange failed", "provider", conn.Spec.Provider, "connection", conn.Name, "reason", err.Error())
		out.Reason = ReasonExchangeFailed
		out.Message = prov.Spec.DisplayName + " did not complete the connection (" + err.Error() + "). Nothing was connected; try again."
		// The connection's status says it too (the tokens, if any, stay as they were).
		if werr := s.updateSecret(ctx, conn, func(sec *corev1.Secret) {
			sec.Data[deviceauth.KeyLastError] = []byte("the code exchange failed: " + err.Error())
		}); werr != nil {
			return CallbackResult{}, werr
		}
		if werr := s.touch(ctx, conn); werr != nil {
			return CallbackResult{}, werr
		}
		return out, nil
	}
	now := s.Now()
	t := deviceauth.FromOAuth(tok, "", now)
	t.ConnectedAt = now
	if err := s.store(ctx, conn, t); err != nil {
		return CallbackResult{}, err
	}
	out.Connected = true
	return out, nil
}

// store writes tokens into the connection's Secret (replacing any it held, and any claim),
// then its status.
func (s *Service) store(ctx context.Context, conn *flexv1.DeviceConnection, t deviceauth.Tokens) error {
	if err := s.updateSecret(ctx, conn, func(sec *corev1.Secret) {
		deviceauth.Write(sec, t)
		delete(sec.Data, deviceauth.KeyRefreshClaim)
	}); err != nil {
		return err
	}
	return s.setStatus(ctx, conn, t)
}

// TokenInput is prod's SiteAuthTokenRequest plus the provider.
type TokenInput struct {
	SiteID, Provider string
	AccessToken      string
	RefreshToken     string
	TokenType        string
	// ExpiresAt is expires_utc, or now + expires_in (zero: no expiry given).
	ExpiresAt time.Time
}

// StoreToken stores a token the API client obtained itself as the site's connection at a
// provider (or its own, "client", covering every asset of the site).
func (s *Service) StoreToken(ctx context.Context, p *auth.Principal, in TokenInput) error {
	site, err := s.Households.SiteToRead(ctx, p, in.SiteID)
	if err != nil {
		return err
	}
	if in.Provider == "" {
		in.Provider = flexv1.ClientProvider
	}
	if in.Provider != flexv1.ClientProvider {
		unknown := app.InvalidFields(app.Field("Unknown provider", "enum", "body", "provider"))
		if !validation.ProviderName(in.Provider) {
			return unknown
		}
		dp := &flexv1.DeviceProvider{}
		if err := s.apiReader.Get(ctx, types.NamespacedName{Name: in.Provider}, dp); err != nil {
			if apierrors.IsNotFound(err) {
				return unknown
			}
			return err
		}
	}
	conn, err := s.ensureConnection(ctx, site, in.Provider)
	if err != nil {
		return err
	}
	now := s.Now()
	return s.store(ctx, conn, deviceauth.Tokens{AccessToken: in.AccessToken, RefreshToken: in.RefreshToken,
		TokenType: in.TokenType, Expiry: in.ExpiresAt, IssuedAt: now, ConnectedAt: now})
}

// ConnectionRecord is one connection as listed: never a token.
type ConnectionRecord struct {
	Provider    string   `json:"provider"`
	DisplayName string   `json:"display_name"`
	Status      string   `json:"status"`
	ConnectedAt *string  `json:"connected_at"`
	ExpiresAt   *string  `json:"expires_at"`
	Assets      []string `json:"assets"`
}

// ConnectionsResult answers GET .../connections.
type ConnectionsResult struct {
	Connections []ConnectionRecord `json:"connections"`
}

// StatusOf spells a phase as the API does.
func StatusOf(p flexv1.ConnectionPhase) string {
	switch p {
	case flexv1.ConnectionConnected:
		return "connected"
	case flexv1.ConnectionNeedsReauthorisation:
		return "needs_reauthorisation"
	case flexv1.ConnectionRevoked:
		return "revoked"
	}
	return "pending"
}

// Connections lists the site's connections with the assets each covers.
func (s *Service) Connections(ctx context.Context, p *auth.Principal, siteID string) (ConnectionsResult, error) {
	site, err := s.Households.SiteToRead(ctx, p, siteID)
	if err != nil {
		return ConnectionsResult{}, err
	}
	byProvider, err := s.assetsByProvider(ctx, site)
	if err != nil {
		return ConnectionsResult{}, err
	}
	conns, err := s.connectionsOf(ctx, site, byProvider)
	if err != nil {
		return ConnectionsResult{}, err
	}
	out := ConnectionsResult{Connections: []ConnectionRecord{}}
	for _, c := range conns {
		rec := ConnectionRecord{Provider: c.Spec.Provider, DisplayName: s.displayName(ctx, c.Spec.Provider),
			Status: StatusOf(c.Status.Phase), ConnectedAt: stamp(c.Status.ConnectedAt),
			ExpiresAt: stamp(c.Status.ExpiresAt), Assets: []string{}}
		if c.Status.Phase == "" {
			rec.Status = StatusOf(flexv1.ConnectionPending)
		}
		if c.Spec.Provider == flexv1.ClientProvider {
			for _, ids := range byProvider {
				rec.Assets = append(rec.Assets, ids...)
			}
			sort.Strings(rec.Assets)
		} else {
			rec.Assets = append(rec.Assets, byProvider[c.Spec.Provider]...)
		}
		out.Connections = append(out.Connections, rec)
	}
	return out, nil
}

func stamp(t *metav1.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Format(time.RFC3339)
	return &s
}

func (s *Service) displayName(ctx context.Context, provider string) string {
	dp := &flexv1.DeviceProvider{}
	if err := s.cache.Get(ctx, types.NamespacedName{Name: provider}, dp); err == nil {
		return dp.Spec.DisplayName
	}
	return provider
}

// connectionsOf are the site's live connections as stored now: those the cache has seen, and
// the connection to each provider of byProvider under the name the flow gives it
// (identity.DeviceConnectionName; one made a moment ago), each read by GET, never a LIST of
// the namespace (docs/scale.md, "Request paths: no LIST").
func (s *Service) connectionsOf(ctx context.Context, site *flexv1.Site, byProvider map[string][]string) ([]flexv1.DeviceConnection, error) {
	found, err := index.NewFreshLookup(s.cache, s.apiReader).DeviceConnectionsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return nil, err
	}
	for prov := range byProvider {
		name := identity.DeviceConnectionName(site.Name, prov)
		if prov == "" || slices.ContainsFunc(found, func(c *flexv1.DeviceConnection) bool { return c.Name == name }) {
			continue
		}
		c := &flexv1.DeviceConnection{}
		switch err := s.apiReader.Get(ctx, types.NamespacedName{Namespace: site.Namespace, Name: name}, c); {
		case err == nil && c.Spec.SiteName == site.Name:
			found = append(found, c)
		case client.IgnoreNotFound(err) != nil:
			return nil, err
		}
	}
	var out []flexv1.DeviceConnection
	for _, c := range found {
		if c.DeletionTimestamp.IsZero() {
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Provider < out[j].Spec.Provider })
	return out, nil
}

// assetsByProvider maps each provider to the API ids of the site's assets whose model it
// controls ("" for the assets with no provider).
func (s *Service) assetsByProvider(ctx context.Context, site *flexv1.Site) (map[string][]string, error) {
	assets, err := index.NewLookup(s.cache).AssetsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return nil, err
	}
	models := &flexv1.AssetModelList{}
	if err := s.cache.List(ctx, models); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, a := range assets {
		prov := deviceauth.ProviderOfModel(models.Items, a.Spec.Model)
		out[prov] = append(out[prov], a.Labels[flexv1.IDLabel])
	}
	for k := range out {
		sort.Strings(out[k])
	}
	return out, nil
}

// ProviderState is one provider the household's assets need, with its connection state.
type ProviderState struct {
	Provider    string `json:"provider"`
	DisplayName string `json:"display_name"`
	Status      string `json:"status"`
}

// HouseholdProviders lists the providers of the end user's own assets with their state
// ("not_connected" when there is no connection): the hosted flow's Connect step.
func (s *Service) HouseholdProviders(ctx context.Context, p *auth.Principal) ([]ProviderState, *flexv1.Site, error) {
	site, err := s.Households.OwnSite(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	byProvider, err := s.assetsByProvider(ctx, site)
	if err != nil {
		return nil, nil, err
	}
	conns, err := s.connectionsOf(ctx, site, byProvider)
	if err != nil {
		return nil, nil, err
	}
	out := []ProviderState{}
	for prov := range byProvider {
		if prov == "" {
			continue
		}
		dp := &flexv1.DeviceProvider{}
		if err := s.cache.Get(ctx, types.NamespacedName{Name: prov}, dp); err != nil {
			if apierrors.IsNotFound(err) {
				continue // not in the catalogue: the client controls these assets itself
			}
			return nil, nil, err
		}
		st := ProviderState{Provider: prov, DisplayName: dp.Spec.DisplayName, Status: "not_connected"}
		for _, c := range conns {
			if c.Spec.Provider == prov {
				st.Status = StatusOf(c.Status.Phase)
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Provider < out[j].Provider })
	return out, site, nil
}

// Disconnect revokes the site's connection at provider where the provider can (RFC 7009),
// deletes its tokens and the connection.
func (s *Service) Disconnect(ctx context.Context, p *auth.Principal, siteID, provider string) error {
	site, err := s.Households.SiteToRead(ctx, p, siteID)
	if err != nil {
		return err
	}
	if !validation.ProviderName(provider) {
		return ErrConnectionNotFound
	}
	conn := &flexv1.DeviceConnection{}
	key := types.NamespacedName{Namespace: site.Namespace, Name: identity.DeviceConnectionName(site.Name, provider)}
	if err := s.apiReader.Get(ctx, key, conn); err != nil {
		if apierrors.IsNotFound(err) {
			return ErrConnectionNotFound
		}
		return err
	}
	if !conn.DeletionTimestamp.IsZero() {
		return ErrConnectionNotFound
	}
	sec := &corev1.Secret{}
	err = s.client.Get(ctx, deviceauth.SecretKey(conn), sec)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	default:
		if t := deviceauth.Read(sec); t.Has() && provider != flexv1.ClientProvider {
			if prov, perr := s.Dialer.Load(ctx, s.apiReader, provider); perr == nil && prov != nil {
				if rerr := prov.RevokeAll(ctx, t); rerr != nil {
					s.Log.Info("revocation at the provider failed; the tokens are deleted anyway",
						"provider", provider, "connection", conn.Name, "reason", rerr.Error())
				}
			}
		}
		if err := s.client.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	if err := s.client.Delete(ctx, conn); client.IgnoreNotFound(err) != nil {
		return err
	}
	return nil
}

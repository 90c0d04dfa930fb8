package deviceauth

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/events"
)

func TestPhase(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Minute), now.Add(time.Hour)
	for _, tc := range []struct {
		name       string
		t          Tokens
		canRefresh bool
		want       flexv1.ConnectionPhase
	}{
		{"nothing stored", Tokens{}, true, flexv1.ConnectionPending},
		{"fresh", Tokens{AccessToken: "a", RefreshToken: "r", Expiry: future}, true, flexv1.ConnectionConnected},
		{"expired, refreshable", Tokens{AccessToken: "a", RefreshToken: "r", Expiry: past}, true, flexv1.ConnectionConnected},
		{"expired, no refresh token", Tokens{AccessToken: "a", Expiry: past}, true, flexv1.ConnectionNeedsReauthorisation},
		{"client token past expires_utc", Tokens{AccessToken: "a", RefreshToken: "r", Expiry: past}, false, flexv1.ConnectionNeedsReauthorisation},
		{"client token, no expiry", Tokens{AccessToken: "k"}, false, flexv1.ConnectionConnected},
		{"invalid_grant", Tokens{AccessToken: "a", RefreshToken: "r", Expiry: future, Invalid: "invalid_grant"}, true,
			flexv1.ConnectionNeedsReauthorisation},
	} {
		if got := Phase(tc.t, now, tc.canRefresh); got != tc.want {
			t.Errorf("%s: Phase = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestDueAtIsEightyPercentOfTheLifetime(t *testing.T) {
	issued := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tok := Tokens{AccessToken: "a", RefreshToken: "r", IssuedAt: issued, Expiry: issued.Add(100 * time.Second)}
	if got, want := DueAt(tok), issued.Add(80*time.Second); !got.Equal(want) {
		t.Errorf("DueAt = %s, want %s", got, want)
	}
	for _, no := range []Tokens{{AccessToken: "a", Expiry: issued}, {AccessToken: "a", RefreshToken: "r"},
		{AccessToken: "a", RefreshToken: "r", Expiry: issued, Invalid: "invalid_grant"}} {
		if !DueAt(no).IsZero() {
			t.Errorf("DueAt(%+v) = %s, want never", no, DueAt(no))
		}
	}
}

func TestTokensRoundTripThroughTheSecret(t *testing.T) {
	at := time.Date(2026, 1, 1, 12, 0, 0, 123, time.UTC)
	in := Tokens{AccessToken: "a", RefreshToken: "r", TokenType: "Bearer", Expiry: at, IssuedAt: at, ConnectedAt: at,
		RefreshedAt: at, LastError: "x"}
	s := &corev1.Secret{Data: map[string][]byte{KeyVerifier: []byte("v")}}
	Write(s, in)
	if got := Read(s); got != in {
		t.Errorf("Read(Write(%+v)) = %+v", in, got)
	}
	Write(s, Tokens{AccessToken: "b"})
	if _, ok := s.Data[KeyRefreshToken]; ok || string(s.Data[KeyVerifier]) != "v" {
		t.Errorf("Write replaces the tokens and keeps the rest: %v", s.Data)
	}
}

func TestHashStateIsNotTheState(t *testing.T) {
	state := NewState()
	h := HashState(state)
	if strings.Contains(h, state) || len(h) > 63 || h != HashState(state) || h == HashState(state+"x") {
		t.Errorf("HashState(%q) = %q", state, h)
	}
}

func TestCheckURL(t *testing.T) {
	public := Dialer{}
	loopback := Dialer{Policy: events.AddressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
	for _, tc := range []struct {
		d   Dialer
		url string
		ok  bool
	}{
		{public, "https://api.myenergi.example/oauth/token", true},
		{public, "http://api.myenergi.example/oauth/token", false},
		{public, "https://127.0.0.1:9096/token", false},
		{public, "http://127.0.0.1:9096/token", false},
		{public, "https://10.0.0.1/token", false},
		{public, "https://169.254.169.254/token", false},
		{loopback, "http://127.0.0.1:9096/token", true},
		{loopback, "https://127.0.0.1:9096/token", true},
		{loopback, "http://10.0.0.1/token", false},
		{loopback, "http://api.myenergi.example/token", false},
		{public, "ftp://api.myenergi.example/token", false},
		{public, "/token", false},
	} {
		err := tc.d.CheckURL(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("CheckURL(%q) with %v = %v, want ok=%v", tc.url, tc.d.Policy.Allow, err, tc.ok)
		}
	}
}

// A provider's error answers are classified without repeating what it said (it may echo a
// token), and invalid_grant is told apart.
func TestRefreshClassifiesTheProvidersAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    func(error) bool
	}{
		{"invalid_grant", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error":"invalid_grant","error_description":"token r-SECRET was revoked"}`))
		}, func(err error) bool { return errors.Is(err, ErrInvalidGrant) }},
		{"503", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
			func(err error) bool {
				return err != nil && !errors.Is(err, ErrInvalidGrant) && strings.Contains(err.Error(), "503")
			}},
		{"garbage", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("<html>r-SECRET")) },
			func(err error) bool { return err != nil && !errors.Is(err, ErrInvalidGrant) }},
	} {
		srv := httptest.NewServer(tc.handler)
		d := Dialer{Policy: events.AddressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
		p := &Provider{Spec: flexv1.DeviceProviderSpec{ClientID: "c", TokenURL: srv.URL + "/token"}, http: d.httpClient()}
		_, err := p.Refresh(context.Background(), "r-SECRET")
		srv.Close()
		if !tc.want(err) {
			t.Errorf("%s: Refresh = %v", tc.name, err)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: the error repeats the provider's answer: %v", tc.name, err)
		}
	}
}

// The dialer refuses an address the policy refuses, whatever the URL said.
func TestRefreshDialsOnlyAllowedAddresses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the refused provider was called")
	}))
	defer srv.Close()
	p := &Provider{Spec: flexv1.DeviceProviderSpec{ClientID: "c", TokenURL: srv.URL + "/token"}, http: Dialer{}.httpClient()}
	if _, err := p.Refresh(context.Background(), "r"); err == nil || errors.Is(err, ErrInvalidGrant) {
		t.Errorf("Refresh to a loopback provider without the allow-list = %v", err)
	}
}

func TestProviderOfModel(t *testing.T) {
	models := []flexv1.AssetModel{
		{Spec: flexv1.AssetModelSpec{ModelName: "zappi", Provider: "myenergi"}},
		{Spec: flexv1.AssetModelSpec{ModelName: "plain"}},
	}
	models[0].Name, models[1].Name = "b", "a"
	for model, want := range map[string]string{"zappi": "myenergi", "plain": "", "": "", "unknown": ""} {
		if got := ProviderOfModel(models, model); got != want {
			t.Errorf("ProviderOfModel(%q) = %q, want %q", model, got, want)
		}
	}
}

// A pooled Dialer gives every Load of a provider the same HTTP client, so that refreshes
// reuse one connection (on main every Load made a new client, and so a new connection per
// call); another provider has a client of its own, and a copy of the Dialer shares them.
func TestPooledDialerReusesOneConnectionPerProvider(t *testing.T) {
	var mu sync.Mutex
	opened := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"a","refresh_token":"r2","token_type":"Bearer","expires_in":3600}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			mu.Lock()
			opened++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	connections := func() int {
		mu.Lock()
		defer mu.Unlock()
		return opened
	}

	d := Dialer{Policy: events.AddressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}.Pooled()
	spec := flexv1.DeviceProviderSpec{ClientID: "c", TokenURL: srv.URL + "/token"}
	for i, dialer := range []Dialer{d, d, d.Pooled()} { // three Loads; the last through a copy
		p, err := dialer.provider("example", spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Refresh(context.Background(), "r"); err != nil {
			t.Fatalf("refresh %d: %v", i, err)
		}
	}
	if n := connections(); n != 1 {
		t.Fatalf("three refreshes opened %d connections, want 1", n)
	}

	other, err := d.provider("other", spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Refresh(context.Background(), "r"); err != nil {
		t.Fatal(err)
	}
	if n := connections(); n != 2 {
		t.Fatalf("another provider's refresh: %d connections in all, want 2 (a client of its own)", n)
	}

	// Without Pooled, every Load has a client (and a connection) of its own.
	unpooled := Dialer{Policy: d.Policy}
	for range 2 {
		p, err := unpooled.provider("example", spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Refresh(context.Background(), "r"); err != nil {
			t.Fatal(err)
		}
	}
	if n := connections(); n != 4 {
		t.Fatalf("two unpooled refreshes: %d connections in all, want 4", n)
	}
}

// Refreshes through one pooled Dialer from many goroutines at once share its clients safely.
func TestPooledDialerIsSafeForConcurrentUse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"a","token_type":"Bearer","expires_in":3600}`))
	}))
	defer srv.Close()
	d := Dialer{Policy: events.AddressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}.Pooled()
	spec := flexv1.DeviceProviderSpec{ClientID: "c", TokenURL: srv.URL + "/token"}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 16 {
		wg.Go(func() {
			p, err := d.provider([]string{"a", "b"}[i%2], spec)
			if err == nil {
				_, err = p.Refresh(context.Background(), "r")
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if a, _ := d.provider("a", spec); a.http != d.client("a") || a.http == d.client("b") {
		t.Error("one client per provider name")
	}
}

// providerReader answers the DeviceProvider "maker" and fails every Secret read with secretErr,
// as an API server that is not answering (or a Secret that is gone) would.
type providerReader struct {
	client.Reader
	secretErr error
}

func (r providerReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	switch o := obj.(type) {
	case *flexv1.DeviceProvider:
		if key.Name != "maker" {
			return apierrors.NewNotFound(flexv1.GroupVersion.WithResource("deviceproviders").GroupResource(), key.Name)
		}
		o.Spec = flexv1.DeviceProviderSpec{AuthorizationURL: "https://maker.example/authorize", TokenURL: "https://maker.example/token",
			ClientID: "id", ClientSecretRef: flexv1.ProviderSecretRef{Name: "maker-secret"}}
		return nil
	default:
		return r.secretErr
	}
}

// A provider that does not exist, or whose secret is gone, is misconfigured; one whose secret
// could not be read because the API server did not answer is ErrUnreadable, so that the use
// cases answer "retry" rather than "not configured".
func TestLoadTellsAnUnreadableProviderFromAMissingOne(t *testing.T) {
	d := Dialer{SecretNamespace: "flexsite-system"}
	secrets := corev1.SchemeGroupVersion.WithResource("secrets").GroupResource()
	for _, tc := range []struct {
		name, provider string
		secretErr      error
		want           func(*Provider, error) bool
	}{
		{"missing provider", "other", nil, func(p *Provider, err error) bool { return p == nil && err == nil }},
		{"secret gone", "maker", apierrors.NewNotFound(secrets, "maker-secret"),
			func(p *Provider, err error) bool { return err != nil && !errors.Is(err, ErrUnreadable) }},
		{"API server unavailable", "maker", apierrors.NewServiceUnavailable("etcd down"),
			func(p *Provider, err error) bool { return errors.Is(err, ErrUnreadable) }},
		{"API server timeout", "maker", apierrors.NewTimeoutError("slow", 1),
			func(p *Provider, err error) bool { return errors.Is(err, ErrUnreadable) }},
	} {
		p, err := d.Load(t.Context(), providerReader{secretErr: tc.secretErr}, tc.provider)
		if !tc.want(p, err) {
			t.Errorf("%s: Load = %v, %v", tc.name, p, err)
		}
	}
}

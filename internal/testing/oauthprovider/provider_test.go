package oauthprovider_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flexsite/flexsite/internal/testing/oauthprovider"
)

// The provider runs as a process of the test module's command; this process serves in front
// of it. The token endpoint answers through the proxy, a fault is this process's function,
// the counters come from the server, and its control endpoint is not the household's.
func TestProviderProcess(t *testing.T) {
	p, err := oauthprovider.Start("127.0.0.1:0", oauthprovider.Options{ClientSecret: "s",
		RedirectURIs: []string{"http://127.0.0.1/oauth/callback"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	exchange := func() int {
		resp, err := http.PostForm(p.TokenURL(), url.Values{"grant_type": {"authorization_code"}, "code": {"forged"},
			"client_id": {"flexsite"}, "client_secret": {"s"}, "redirect_uri": {"http://127.0.0.1/oauth/callback"}})
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if got := exchange(); got != http.StatusBadRequest {
		t.Errorf("a forged code: HTTP %d, want 400 (invalid_grant)", got)
	}
	if got := p.Refused(); got != 1 {
		t.Errorf("Refused() = %d after one forged code, want 1", got)
	}
	if p.CodeGrants() != 0 || p.RefreshGrants() != 0 || p.ActiveAccessTokens() != 0 {
		t.Errorf("grants or tokens without a consent: %d %d %d", p.CodeGrants(), p.RefreshGrants(), p.ActiveAccessTokens())
	}

	var faulted atomic.Int32
	p.SetFault(func(w http.ResponseWriter, _ *http.Request) bool {
		faulted.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	if got := exchange(); got != http.StatusServiceUnavailable || faulted.Load() != 1 {
		t.Errorf("with a fault: HTTP %d, the fault called %d times; want 503, once", got, faulted.Load())
	}
	if got := p.Refused(); got != 1 {
		t.Errorf("a faulted request reached the server: Refused() = %d, want 1", got)
	}
	p.SetFault(nil)
	if got := exchange(); got != http.StatusBadRequest {
		t.Errorf("fault removed: HTTP %d, want 400", got)
	}

	resp, err := http.Get(p.URL + "/_control")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the control endpoint through the provider's URL: HTTP %d, want 404", resp.StatusCode)
	}
	p.RevokeEverything()

	// The consent page is fosite's, behind the proxy.
	resp, err = http.Get(p.AuthorizationURL() + "?response_type=code&client_id=flexsite&state=abcdefgh12345678" +
		"&code_challenge_method=S256&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM" +
		"&redirect_uri=" + url.QueryEscape("http://127.0.0.1:9/oauth/callback"))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `id="allow"`) {
		t.Errorf("the consent page: HTTP %d %.200s", resp.StatusCode, page)
	}
}

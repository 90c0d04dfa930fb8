package delivery

import (
	"context"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/events"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// TestDialerRefusesWhatThePolicyRefuses posts through the deliverer's own HTTP client to an
// HTTPS server on loopback: refused (before any byte is sent) unless loopback is allowed,
// whether the URL names the address or a name that resolves to it (as a rebinding name
// would). Nothing is sent anywhere but loopback.
func TestDialerRefusesWhatThePolicyRefuses(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	u, _ := url.Parse(srv.URL)
	byName := "https://localhost:" + u.Port() + "/"
	wh, _ := standardwebhooks.NewWebhook("whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0")
	ev := &events.Event{ID: "evt_1", Type: flexv1.EventPing, Time: time.Now(), Data: "{}"}

	for _, c := range []struct {
		name    string
		allow   []netip.Prefix
		url     string
		allowed bool
	}{
		{"loopback address, default policy", nil, srv.URL, false},
		{"name resolving to loopback, default policy", nil, byName, false},
		{"loopback allowed", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, srv.URL, true},
		{"another private range allowed only", []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, srv.URL, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &Deliverer{Policy: events.AddressPolicy{Allow: c.allow}, RootCAs: roots}
			d.defaults()
			before := hits.Load()
			sub := &flexv1.Subscription{Spec: flexv1.SubscriptionSpec{URL: c.url}}
			code, err := d.attempt(context.Background(), sub, credentials{wh: wh}, ev)
			if c.allowed {
				if err != nil || code != http.StatusNoContent {
					t.Fatalf("allowed: %d, %v", code, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "refused") {
				t.Fatalf("want a refusal, got %d, %v", code, err)
			}
			if hits.Load() != before {
				t.Fatal("the refused request reached the server")
			}
		})
	}
}

// TestDialerDecidesWithoutTheZone: an IPv6 zone id does not take an address out of the
// policy. A receiver on the IPv6 loopback is reached through "https://[::1%25lo]:port/"
// (a zone on a refused address, as "fe80::…%eth0" in the wild): refused before any
// connection unless ::1 is allowed. Nothing is sent anywhere but loopback.
func TestDialerDecidesWithoutTheZone(t *testing.T) {
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Listener = ln
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	wh, _ := standardwebhooks.NewWebhook("whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0")
	ev := &events.Event{ID: "evt_1", Type: flexv1.EventPing, Time: time.Now(), Data: "{}"}
	for _, c := range []struct {
		name    string
		allow   []netip.Prefix
		url     string
		allowed bool
	}{
		{"zone on loopback, default policy", nil, "https://[::1%25lo]:" + port + "/x", false},
		{"numeric zone on loopback, default policy", nil, "https://[::1%251]:" + port + "/x", false},
		{"no zone, default policy", nil, "https://[::1]:" + port + "/x", false},
		{"zone on loopback, IPv4 loopback allowed only", []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
			"https://[::1%25lo]:" + port + "/x", false},
		{"zone on loopback, ::1 allowed", []netip.Prefix{netip.MustParsePrefix("::1/128")},
			"https://[::1%25lo]:" + port + "/x", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := &Deliverer{Policy: events.AddressPolicy{Allow: c.allow}, RootCAs: roots}
			d.defaults()
			before := conns.Load()
			_, err := d.attempt(context.Background(), &flexv1.Subscription{Spec: flexv1.SubscriptionSpec{URL: c.url}}, credentials{wh: wh}, ev)
			if c.allowed {
				// Connected (whatever TLS then makes of the zone in the name).
				if conns.Load() == before || (err != nil && strings.Contains(err.Error(), "refused")) {
					t.Fatalf("allowed: not connected, %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "refused") {
				t.Fatalf("want a refusal, got %v", err)
			}
			if conns.Load() != before {
				t.Fatal("the refused request connected")
			}
		})
	}
}

// TestNoRedirects: a receiver's redirect is an answer (a failure), not followed to wherever it
// points.
func TestNoRedirects(t *testing.T) {
	var followed atomic.Bool
	target := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed.Store(true) }))
	defer target.Close()
	srv := httptest.NewTLSServer(http.RedirectHandler(target.URL, http.StatusTemporaryRedirect))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	d := &Deliverer{Policy: events.AddressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, RootCAs: roots}
	d.defaults()
	wh, _ := standardwebhooks.NewWebhook("whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0")
	ev := &events.Event{ID: "evt_1", Type: flexv1.EventPing, Time: time.Now(), Data: "{}"}
	code, err := d.attempt(context.Background(), &flexv1.Subscription{Spec: flexv1.SubscriptionSpec{URL: srv.URL}}, credentials{wh: wh}, ev)
	if err == nil || code != http.StatusTemporaryRedirect || followed.Load() {
		t.Fatalf("redirect: %d, %v, followed %v", code, err, followed.Load())
	}
}

package facade

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// FuzzBalanceURLQuery fuzzes GET /rewards/{site_id}/url/balance's query and site id: the
// handler answers a 422 at ["query", ...] or ["path", "site_id"] before reading anything, or
// reaches the store only with a usable redirect_uri and well-formed booleans.
func FuzzBalanceURLQuery(f *testing.F) {
	for _, seed := range []struct{ query, id string }{
		{"redirect_uri=https%3A%2F%2Fapp.example.com%2Fdone", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		{"redirect_uri=https%3A%2F%2Fapp.example.com&enforce_two_factor_auth=true&hide_transactions=0&auto_redirect_to_setup=yes", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		{"", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		{"redirect_uri=javascript%3Aalert(1)", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		{"redirect_uri=%2F%2Fevil.example", "x"},
		{"redirect_uri=https%3A%2F%2Fu%3Ap%40app.example.com", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		{"redirect_uri=https%3A%2F%2Fapp.example.com&enforce_two_factor_auth=maybe", ""},
		{"redirect_uri=http%3A%2F%2F%5B%3A%3A1%5D%3A8080%2Fx%3Fa%3Db", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		{"%zz&redirect_uri", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
	} {
		f.Add(seed.query, seed.id)
	}
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, rawQuery, id string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.URL.RawQuery = rawQuery
		r.SetPathValue("site_id", id)
		_, err := s.balanceURL(r, fuzzPrincipal)
		got := checkAnswer(t, s, err, "query", "path")
		if !got.reached {
			return
		}
		q, _ := url.ParseQuery(rawQuery)
		u, ok := parseRedirectURI(q.Get("redirect_uri"))
		if !ok || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
			t.Fatalf("reached the store with redirect_uri %q", q.Get("redirect_uri"))
		}
		for _, key := range []string{"enforce_two_factor_auth", "hide_transactions", "auto_redirect_to_setup"} {
			f := &fields{}
			f.queryBool(q, key)
			if len(f.items) > 0 {
				t.Fatalf("reached the store with %s=%q", key, q.Get(key))
			}
		}
		// The redirect is allowed into the page's form-action as its origin, nothing more.
		if strings.ContainsAny(u.Host, " ;'\"") {
			t.Fatalf("redirect host %q could break the Content-Security-Policy", u.Host)
		}
	})
}

// FuzzRewardsCookie fuzzes the rewards page's session cookie: a value that cannot name a
// link is refused without reading anything; one that can is looked up by its key only.
func FuzzRewardsCookie(f *testing.F) {
	for _, seed := range []string{
		"", ".", "0123456789abcdef0123456789abcdef01234567.SESSION", "0123456789ABCDEF0123456789ABCDEF01234567.s",
		"../../etc.x", "0123456789abcdef0123456789abcdef01234567.", "a.b.c", "\x00.\xff",
	} {
		f.Add(seed)
	}
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, value string) {
		r := httptest.NewRequest(http.MethodGet, "/hosted/rewards", nil)
		r.Header.Set("Cookie", rewardsCookie+"="+value)
		sess, err := s.rewardsSessionOf(r)
		if sess != nil {
			t.Fatal("a session from a store that holds nothing")
		}
		cookie, cerr := r.Cookie(rewardsCookie)
		key, session, _ := "", "", false
		if cerr == nil {
			key, session, _ = strings.Cut(cookie.Value, ".")
		}
		wellFormed := cerr == nil && len(key) == 40 && strings.Trim(key, "0123456789abcdef") == "" && session != ""
		switch {
		case errors.Is(err, errStoreReached) && !wellFormed:
			t.Fatalf("cookie %q reached the store", value)
		case errors.Is(err, errNoLink) && wellFormed:
			t.Fatalf("well-formed cookie %q refused without a lookup", value)
		case err == nil || (!errors.Is(err, errStoreReached) && !errors.Is(err, errNoLink)):
			t.Fatalf("cookie %q: %v", value, err)
		}
	})
}

// FuzzRewardsLinkCode fuzzes the one-time code of GET /hosted/rewards/link/{code}: any code is
// looked up by its hash (whatever it holds, the Secret name is 40 hex digits), and the page
// answered is HTML, never a panic.
func FuzzRewardsLinkCode(f *testing.F) {
	for _, seed := range []string{"", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "../..", "%00", strings.Repeat("A", 4096)} {
		f.Add(seed)
	}
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, code string) {
		key := linkKey(code)
		if len(key) != 40 || strings.Trim(key, "0123456789abcdef") != "" {
			t.Fatalf("linkKey(%q) = %q", code, key)
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.SetPathValue("code", code)
		w := httptest.NewRecorder()
		s.rewardsRedeem(w, r)
		if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Fatalf("content type %q", ct)
		}
		if w.Header().Get("Set-Cookie") != "" || !reflect.DeepEqual(w.Header().Values("Location"), []string(nil)) {
			t.Fatal("a session from a store that holds nothing")
		}
	})
}

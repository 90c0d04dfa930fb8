package restapi

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/validation"
)

// FuzzBalanceURLQuery fuzzes GET /rewards/{site_id}/url/balance's query and site id: the
// handler answers a 422 at ["query", ...] or ["path", "site_id"] before reading anything, or
// reaches the store only with a usable redirect_uri and well-formed booleans.
func FuzzBalanceURLQuery(f *testing.F) {
	for _, seed := range []struct{ query, id string }{
		{"redirect_uri=https%3A%2F%2Fapp.example.com%2Fdone", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		{"redirect_uri=https%3A%2F%2Fapp.example.com&enforce_two_factor_auth=true&hide_transactions=0&auto_redirect_to_setup=yes",
			"8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		{"", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		{"redirect_uri=javascript%3Aalert(1)", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		{"redirect_uri=%2F%2Fevil.example", "x"},
		{"redirect_uri=https%3A%2F%2Fu%3Ap%40app.example.com", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		{"redirect_uri=https%3A%2F%2Fapp.example.com&enforce_two_factor_auth=maybe", ""},
		{"redirect_uri=http%3A%2F%2F%5B%3A%3A1%5D%3A8080%2Fx%3Fa%3Db", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		{"%zz&redirect_uri", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		// Hosts that would break the page's Content-Security-Policy (refused).
		{"redirect_uri=http%3A%2F%2F%22", "00000000-0000-0000-0000-000000000000"},
		{"redirect_uri=https%3A%2F%2Fa%27b.example", "00000000-0000-0000-0000-000000000000"},
		{"redirect_uri=https%3A%2F%2Fexample.com%3Bscript-src%2F", "00000000-0000-0000-0000-000000000000"},
		{"redirect_uri=https%3A%2F%2Fa%2Cb", "00000000-0000-0000-0000-000000000000"},
		// Private-use schemes (the API client's declared schemes decide).
		{"redirect_uri=com.example.app%3A%2Fcallback", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		{"redirect_uri=myapp%3A%2Fcallback", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
		{"redirect_uri=com.example.app%3A%2F%2Fu%3Ap%40cb", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"},
	} {
		f.Add(seed.query, seed.id)
	}
	a := fuzzAPI()
	f.Fuzz(func(t *testing.T, rawQuery, id string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.URL.RawQuery = rawQuery
		r.SetPathValue("site_id", id)
		_, err := a.balanceURL(r, fuzzPrincipal)
		got := checkAnswer(t, err, "query", "path")
		if !got.Reached {
			return
		}
		q, _ := url.ParseQuery(rawQuery)
		norm, err := validation.RedirectURI(q.Get("redirect_uri"), nil)
		if validation.NeedsAppSchemes(err) {
			// A private-use scheme: the API client's declared schemes are read (the store).
			norm, err = validation.RedirectURI(q.Get("redirect_uri"), []string{strings.SplitN(q.Get("redirect_uri"), ":", 2)[0]})
		}
		if err != nil {
			t.Fatalf("reached the store with redirect_uri %q", q.Get("redirect_uri"))
		}
		u, err := url.Parse(norm)
		if err != nil || u.User != nil || validation.RedirectSource(norm) == "" {
			t.Fatalf("redirect_uri %q normalised to %q", q.Get("redirect_uri"), norm)
		}
		for _, key := range []string{"enforce_two_factor_auth", "hide_transactions", "auto_redirect_to_setup"} {
			fl := &fields{}
			queryBool(fl, q, key)
			if len(fl.Items()) > 0 {
				t.Fatalf("reached the store with %s=%q", key, q.Get(key))
			}
		}
		if _, err := pathID(id, "site_id"); err != nil {
			t.Fatalf("reached the store with site_id %q", id)
		}
		// The redirect is allowed into the page's form-action as its origin or scheme, nothing more.
		if strings.ContainsAny(validation.RedirectSource(norm), " ;,'\"<>") {
			t.Fatalf("redirect %q could break the Content-Security-Policy", norm)
		}
	})
}

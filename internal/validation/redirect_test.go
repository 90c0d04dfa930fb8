package validation

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestRedirectURI(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"https://app.example.com/done", "https://app.example.com/done"},
		{"HTTPS://App.Example.COM:8443/done?x=1", "https://app.example.com:8443/done?x=1"},
		{"https://example.com/done\"><script>alert(1)</script>", "https://example.com/done%22%3E%3Cscript%3Ealert%281%29%3C/script%3E"},
		{"http://localhost:8080/back", "http://localhost:8080/back"},
		{"http://127.0.0.1:9/x", "http://127.0.0.1:9/x"},
		{"http://[::1]:9/x", "http://[::1]:9/x"},
		{"https://[2001:db8::1]/x", "https://[2001:db8::1]/x"},
		// Refused: every one of these.
		{"", ""},
		{"/relative", ""},
		{"javascript:alert(1)", ""},
		{"http://app.example.com/done", ""},
		{"ftp://example.com/", ""},
		{"https://user:pw@example.com/", ""},
		{"https://example.com;script-src/", ""},
		{"https://example.com%3Bscript-src/", ""},
		{"https://exa mple.com/", ""},
		{"https://example.com/\x00", ""},
		{"https://example.com/\u2028", ""},
		{"https://-bad-.example.com/", ""},
		{"https://under_score.example.com/", ""},
		{"https://[fe80::1%25eth0]/", ""},
		{"https://" + string(make([]byte, 2050)), ""},
	} {
		got, err := RedirectURI(tc.raw, nil)
		if tc.want == "" {
			if err == nil {
				t.Errorf("RedirectURI(%q) = %q, want refused", tc.raw, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("RedirectURI(%q) = %q, %v; want %q", tc.raw, got, err, tc.want)
		}
	}
	if o := Origin("https://app.example.com:8443/done?x=1"); o != "https://app.example.com:8443" {
		t.Errorf("Origin = %q", o)
	}
}

// TestRedirectURIAppSchemes: a private-use scheme (RFC 8252 section 7.1) is accepted only when
// the API client declares it, and every refusal says why.
func TestRedirectURIAppSchemes(t *testing.T) {
	declared := []string{"com.example.app", "uk.co.household.rewards"}
	for _, tc := range []struct {
		raw, want string
		// typ and msg (a substring) of a refusal; undeclared: NeedsAppSchemes holds.
		typ, msg   string
		undeclared bool
	}{
		{raw: "com.example.app:/callback", want: "com.example.app:/callback"},
		{raw: "COM.Example.App:/callback?x=1", want: "com.example.app:/callback?x=1"},
		{raw: "com.example.app://callback/done", want: "com.example.app://callback/done"},
		{raw: "uk.co.household.rewards:/back", want: "uk.co.household.rewards:/back"},
		{raw: "com.example.app:/cb\"><script>", want: "com.example.app:/cb%22%3E%3Cscript%3E"},
		{raw: "https://app.example.com/done", want: "https://app.example.com/done"},
		{raw: "http://localhost:8080/back", want: "http://localhost:8080/back"},
		// Refused.
		{raw: "com.evil.app:/callback", typ: "url_scheme_undeclared", msg: `"com.evil.app" is not one of`, undeclared: true},
		{raw: "com.example.app.evil:/callback", typ: "url_scheme_undeclared", undeclared: true},
		{raw: "http://app.example.com/done", typ: "url_scheme", msg: "must use https"},
		{raw: "http://10.0.0.1/done", typ: "url_scheme", msg: "loopback"},
		{raw: "myapp:/callback", typ: "url_scheme", msg: "reverse domain name"},
		{raw: "ftp://example.com/", typ: "url_scheme"},
		{raw: "file:///etc/passwd", typ: "url_scheme"},
		{raw: "data:/text/html,x", typ: "url_scheme"},
		{raw: "javascript:alert(1)", typ: "url_parsing"},
		{raw: "com.example.app:callback", typ: "url_parsing"},
		{raw: "com.example.app://user:pw@callback/", typ: "url_parsing"},
		{raw: "com.example.app://under_score/", typ: "url_parsing"},
		{raw: "com.example.app:/call back", typ: "url_parsing"},
		{raw: "com.example.app:/\u2028", typ: "url_parsing"},
		{raw: "-com.example.app:/callback", typ: "url_parsing"},
		{raw: "/relative", typ: "url_parsing"},
	} {
		got, err := RedirectURI(tc.raw, declared)
		if tc.want != "" {
			if err != nil || got != tc.want {
				t.Errorf("RedirectURI(%q) = %q, %v; want %q", tc.raw, got, err, tc.want)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) || e.Type != tc.typ || !strings.Contains(e.Msg, tc.msg) {
			t.Errorf("RedirectURI(%q) = %q, %v; want a %s refusal saying %q", tc.raw, got, err, tc.typ, tc.msg)
			continue
		}
		if NeedsAppSchemes(err) != tc.undeclared {
			t.Errorf("NeedsAppSchemes(RedirectURI(%q)) = %v, want %v", tc.raw, !tc.undeclared, tc.undeclared)
		}
	}
	// Without declared schemes, a private-use scheme is refused, and says it needs them.
	if _, err := RedirectURI("com.example.app:/callback", nil); !NeedsAppSchemes(err) {
		t.Errorf("RedirectURI(private-use, no schemes) = %v, want the undeclared refusal", err)
	}
}

func TestAppScheme(t *testing.T) {
	for _, s := range []string{"com.example.app", "uk.co.household-rewards.app2", "io.flexsite.a"} {
		if err := AppScheme(s); err != nil {
			t.Errorf("AppScheme(%q) = %v, want accepted", s, err)
		}
	}
	for _, s := range []string{"", "https", "http", "javascript", "myapp", "Com.example.app", "com..app", ".com.app",
		"com.app.", "1com.app", "com.-app", "com.app-", "com_example.app", "com.example.app:", "com+x.app",
		"com." + strings.Repeat("a", MaxAppSchemeLength)} {
		if err := AppScheme(s); err == nil {
			t.Errorf("AppScheme(%q) accepted, want refused", s)
		}
	}
}

// TestAppSchemeIsTheCRDPattern: the APIClient CRD's pattern for spec.redirectSchemes accepts
// exactly what AppScheme does (the length bound aside: TestAppSchemeBound).
func TestAppSchemeIsTheCRDPattern(t *testing.T) {
	crd, err := os.ReadFile("../../config/crd/bases/flexsite.io_apiclients.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)redirectSchemes:.*?pattern: (\S+)`).FindSubmatch(crd)
	if m == nil {
		t.Fatal("no pattern for spec.redirectSchemes in the APIClient CRD")
	}
	pattern := regexp.MustCompile(string(m[1]))
	for _, s := range []string{"com.example.app", "uk.co.household-rewards.app2", "io.flexsite.a", "a.1", "", "https",
		"myapp", "Com.example.app", "com..app", ".com.app", "com.app.", "1com.app", "com.-app", "com.app-", "com-.app",
		"com_example.app", "com.example.app:", "com+x.app", "com.example.app\n"} {
		if got, want := pattern.MatchString(s), AppScheme(s) == nil; got != want {
			t.Errorf("the CRD's pattern matches %q: %v; AppScheme accepts it: %v", s, got, want)
		}
	}
}

func TestRedirectSource(t *testing.T) {
	for normalised, want := range map[string]string{
		"https://app.example.com:8443/done?x=1": "https://app.example.com:8443",
		"http://localhost:8080/back":            "http://localhost:8080",
		"com.example.app:/callback":             "com.example.app:",
		"com.example.app://cb/done":             "com.example.app:",
		"http://app.example.com/done":           "",
		"javascript:alert(1)":                   "",
		"https://example.com;script-src/":       "",
		"com.example.app:/x y":                  "",
		"":                                      "",
	} {
		if got := RedirectSource(normalised); got != want {
			t.Errorf("RedirectSource(%q) = %q, want %q", normalised, got, want)
		}
	}
}

func TestWebOrigin(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"https://app.example.com", "https://app.example.com"},
		{"https://App.Example.COM/", "https://app.example.com"},
		{"https://app.example.com:443", "https://app.example.com"},
		{"http://localhost:3000", "http://localhost:3000"},
		{"http://127.0.0.1:80", "http://127.0.0.1"},
		{"https://[::1]:8443", "https://[::1]:8443"},
		// Refused.
		{"", ""},
		{"app.example.com", ""},
		{"https://app.example.com/path", ""},
		{"https://app.example.com?x", ""},
		{"https://app.example.com#x", ""},
		{"https://user@app.example.com", ""},
		{"https://example.com;script-src", ""},
		{"https://a,b", ""},
		{"https://a'b.example", ""},
		{"https://under_score.example", ""},
		{"https://[fe80::1%25eth0]", ""},
		{"javascript://app.example.com", ""},
		{"https://app.example.com\u0000", ""},
	} {
		got, err := WebOrigin(tc.raw)
		if tc.want == "" {
			if err == nil {
				t.Errorf("WebOrigin(%q) = %q, want refused", tc.raw, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("WebOrigin(%q) = %q, %v; want %q", tc.raw, got, err, tc.want)
		}
	}
}

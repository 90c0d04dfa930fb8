package validation

import "testing"

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
		got, err := RedirectURI(tc.raw)
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

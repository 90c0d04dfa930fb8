package validation

import (
	"net/netip"
	"net/url"
	"strings"
)

// maxRedirectURI bounds a redirect_uri.
const maxRedirectURI = 2048

// The schemes of the web's URLs.
const (
	schemeHTTP  = "http"
	schemeHTTPS = "https"
)

// RedirectURI checks where a household is sent back to (a rewards link's redirect_uri) and
// answers it normalised: an absolute https URL (http only to a loopback host, as a developer's
// machine serves one), no credentials, no whitespace or control characters, and a host that
// is a valid DNS name or IP address. The answer is the URL as net/url writes it (scheme and
// host in lower case, path and query percent-encoded), so it can go into a Location header,
// and its origin into a Content-Security-Policy, as it is.
func RedirectURI(raw string) (string, error) {
	invalid := newError("url_parsing", "Input should be an absolute https URL with a valid host name")
	if raw == "" || len(raw) > maxRedirectURI || strings.IndexFunc(raw, func(r rune) bool {
		return r <= ' ' || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == '\u2028' || r == '\u2029'
	}) >= 0 {
		return "", invalid
	}
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.User != nil || u.Host == "" {
		return "", invalid
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	host := u.Hostname()
	if !validHost(host) {
		return "", invalid
	}
	if port := u.Port(); port == "" && strings.HasSuffix(u.Host, ":") {
		u.Host = strings.TrimSuffix(u.Host, ":")
	}
	switch {
	case u.Scheme == schemeHTTPS:
	case u.Scheme == schemeHTTP && loopback(host):
	default:
		return "", invalid
	}
	return u.String(), nil
}

// Origin is the scheme://host[:port] of a URL RedirectURI accepted.
func Origin(normalised string) string {
	u, err := url.Parse(normalised)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// validHost: an IP literal, or a DNS name of letters, digits and hyphens in dot-separated
// labels of 1 to 63 characters (no label starting or ending with a hyphen), 253 at most.
func validHost(host string) bool {
	if _, err := netip.ParseAddr(host); err == nil {
		return !strings.Contains(host, "%") // no zone: a redirect is not to a link on one interface
	}
	if host == "" || len(host) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return false
			}
		}
	}
	return true
}

// loopback: localhost, or a loopback address.
func loopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// WebOrigin checks a web origin (the allowed_origin of an end user's token: the page that
// embeds the hosted flow) and answers it spelt as a browser's Origin header spells it: scheme
// and host in lower case, no default port, no trailing slash. It takes http(s)://host[:port]
// and nothing more, with a host that is a valid DNS name or IP address (no zone), so that it
// can be compared with an Origin header and sent back in Access-Control-Allow-Origin as it is.
func WebOrigin(raw string) (string, error) {
	invalid := newError("url_parsing", "Input should be an origin: scheme://host[:port], e.g. https://app.example.com")
	if raw == "" || len(raw) > 2048 || strings.IndexFunc(raw, func(r rune) bool { return r <= ' ' || IsControl(r) }) >= 0 {
		return "", invalid
	}
	u, err := url.Parse(raw)
	if err != nil || (!strings.EqualFold(u.Scheme, schemeHTTPS) && !strings.EqualFold(u.Scheme, schemeHTTP)) ||
		u.Host == "" || u.Opaque != "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" ||
		u.Fragment != "" || strings.HasSuffix(raw, "?") || strings.HasSuffix(raw, "#") {
		return "", invalid
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if !validHost(strings.ToLower(u.Hostname())) || strings.HasSuffix(host, ":") {
		return "", invalid
	}
	if port := u.Port(); (scheme == schemeHTTPS && port == "443") || (scheme == schemeHTTP && port == "80") {
		host = strings.TrimSuffix(host, ":"+port)
	}
	return scheme + "://" + host, nil
}

package validation

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// maxRedirectURI bounds a redirect_uri.
const maxRedirectURI = 2048

// The schemes of the web's URLs.
const (
	schemeHTTP  = "http"
	schemeHTTPS = "https"
)

// The refusals of RedirectURI, told at redirect_uri.
const (
	msgRedirectForm = "Input should be an absolute https URL with a valid host name, " +
		"or a URI of a private-use scheme the API client declares (e.g. com.example.app:/callback)"
	msgRedirectHTTP   = "redirect_uri must use https: http is allowed only to a loopback host (localhost, 127.0.0.1, [::1])"
	msgRedirectScheme = "redirect_uri must use https, or a private-use scheme the API client declares " +
		"(a reverse domain name, e.g. com.example.app:/callback)"
	// msgRedirectUndeclared names the scheme (only letters, digits, '+', '-' and '.' reach it).
	msgRedirectUndeclared = "redirect_uri's scheme %q is not one of the API client's redirectSchemes"
	// typeRedirectUndeclared is the refusal of a private-use scheme the caller did not declare
	// (NeedsAppSchemes tells it apart).
	typeRedirectUndeclared = "url_scheme_undeclared"
)

// MaxAppSchemeLength bounds a private-use scheme an API client declares (the APIClient CRD's
// items:MaxLength says the same).
const MaxAppSchemeLength = 100

// RedirectURI checks where a household is sent back to (a rewards link's or a device
// authorisation's redirect_uri) and answers it normalised. It is one of:
//
//   - an absolute https URL: no credentials, and a host that is a valid DNS name or IP
//     address (http only to a loopback host, as a developer's machine serves one);
//   - a URI of a private-use scheme (RFC 8252 section 7.1: a reverse domain name such as
//     com.example.app, the way a mobile app receives the browser back) that is one of
//     appSchemes, the schemes the caller's API client declares: an authority is optional
//     (com.example.app:/callback, com.example.app://callback), credentials and an opaque
//     form (com.example.app:callback) are refused.
//
// Nothing else: no other scheme (javascript:, data:, file:, ftp:), no whitespace or control
// characters, at most 2048 bytes. The answer is the URI as net/url writes it (scheme and host
// in lower case, path and query percent-encoded), so it can go into a Location header, and its
// RedirectSource into a Content-Security-Policy, as it is. A private-use scheme not among
// appSchemes is refused with an error NeedsAppSchemes recognises, so that a caller may read
// the schemes only when they matter.
func RedirectURI(raw string, appSchemes []string) (string, error) {
	invalid := newError("url_parsing", msgRedirectForm)
	if raw == "" || len(raw) > maxRedirectURI || strings.IndexFunc(raw, func(r rune) bool {
		return r <= ' ' || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == '\u2028' || r == '\u2029'
	}) >= 0 {
		return "", invalid
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" || u.User != nil {
		return "", invalid
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	host := u.Hostname()
	switch {
	case u.Scheme == schemeHTTPS || u.Scheme == schemeHTTP:
		if u.Host == "" || !validHost(host) {
			return "", invalid
		}
		if u.Scheme == schemeHTTP && !loopback(host) {
			return "", newError("url_scheme", msgRedirectHTTP)
		}
	case AppScheme(u.Scheme) == nil:
		if u.Host != "" && !validHost(host) {
			return "", invalid
		}
		if !slices.ContainsFunc(appSchemes, func(s string) bool { return strings.EqualFold(s, u.Scheme) }) {
			return "", newError(typeRedirectUndeclared, fmt.Sprintf(msgRedirectUndeclared, u.Scheme))
		}
	default:
		return "", newError("url_scheme", msgRedirectScheme)
	}
	if port := u.Port(); port == "" && strings.HasSuffix(u.Host, ":") {
		u.Host = strings.TrimSuffix(u.Host, ":")
	}
	return u.String(), nil
}

// NeedsAppSchemes tells whether err is RedirectURI's refusal of a private-use scheme that is
// not among the schemes it was given: asked again with the caller's declared schemes, it may
// be accepted.
func NeedsAppSchemes(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Type == typeRedirectUndeclared
}

// AppScheme checks a private-use URI scheme an API client declares for its apps (RFC 8252
// section 7.1): a reverse domain name, lower case, of at least two dot-separated labels of
// letters, digits and hyphens, the first starting with a letter (com.example.app), at most
// MaxAppSchemeLength bytes. It can never be http, https or any other scheme of the web
// (none holds a dot). The APIClient CRD's pattern for spec.redirectSchemes is the same rule.
func AppScheme(s string) error {
	invalid := newError("value_error", "A redirect scheme must be a reverse domain name in lower case, e.g. com.example.app")
	if len(s) == 0 || len(s) > MaxAppSchemeLength || s[0] < 'a' || s[0] > 'z' {
		return invalid
	}
	labels := strings.Split(s, ".")
	if len(labels) < 2 {
		return invalid
	}
	for _, label := range labels {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return invalid
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return invalid
			}
		}
	}
	return nil
}

// Origin is the scheme://host[:port] of an http(s) URL RedirectURI accepted ("" for any
// other).
func Origin(normalised string) string {
	u, err := url.Parse(normalised)
	if err != nil || (u.Scheme != schemeHTTPS && u.Scheme != schemeHTTP) {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// RedirectSource is the Content-Security-Policy source that lets a page's form send the
// browser on to a URI RedirectURI accepted: its origin for https (or loopback http), its scheme
// ("com.example.app:", a scheme-source) for a private-use scheme; "" for anything else.
func RedirectSource(normalised string) string {
	u, err := url.Parse(normalised)
	if err != nil {
		return ""
	}
	if AppScheme(u.Scheme) == nil {
		if _, err := RedirectURI(normalised, []string{u.Scheme}); err != nil {
			return ""
		}
		return u.Scheme + ":"
	}
	norm, err := RedirectURI(normalised, nil)
	if err != nil {
		return ""
	}
	return Origin(norm)
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

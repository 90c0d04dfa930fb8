package events

import (
	"net/url"
	"strings"
	"unicode"
)

// MaxURL bounds a subscription's url (as the Subscription CRD does).
const MaxURL = 2048

// CheckURL answers why a subscription's url (the REST API's url, an OpenADR callbackUrl) is
// refused, or "" (the address itself is checked at every delivery, on the resolved address,
// and where an address literal is given, by AddressPolicy.CheckURLHost).
func CheckURL(raw string) string {
	if len(raw) > MaxURL {
		return "URL is too long"
	}
	if strings.IndexFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return "URL must not contain spaces or control characters"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Hostname() == "":
		return "URL is not valid"
	case u.Scheme != "https":
		return "URL must use https"
	case u.User != nil:
		return "URL must not carry credentials"
	case u.Fragment != "":
		return "URL must not have a fragment"
	}
	return ""
}

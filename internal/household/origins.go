package household

import (
	"slices"
	"strings"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// MaxAllowedOrigins is how many origins a Site remembers: the oldest is forgotten first.
const MaxAllowedOrigins = 10

// AllowedOrigins returns the origins granted for a site, oldest first.
func AllowedOrigins(site *flexv1.Site) []string {
	return strings.Fields(site.Annotations[flexv1.AllowedOriginsAnnotation])
}

// OriginAllowed reports whether a component token was issued for origin on this site.
func OriginAllowed(site *flexv1.Site, origin string) bool {
	return origin != "" && slices.Contains(AllowedOrigins(site), origin)
}

// GrantOrigin records origin as allowed for the site (moving it to the newest place) and
// reports whether the annotation changed. It keeps at most MaxAllowedOrigins origins.
func GrantOrigin(site *flexv1.Site, origin string) bool {
	if origin == "" || strings.ContainsAny(origin, " \t\r\n") {
		return false
	}
	current := AllowedOrigins(site)
	if n := len(current); n > 0 && current[n-1] == origin {
		return false
	}
	next := slices.DeleteFunc(slices.Clone(current), func(o string) bool { return o == origin })
	next = append(next, origin)
	if len(next) > MaxAllowedOrigins {
		next = next[len(next)-MaxAllowedOrigins:]
	}
	if site.Annotations == nil {
		site.Annotations = map[string]string{}
	}
	site.Annotations[flexv1.AllowedOriginsAnnotation] = strings.Join(next, " ")
	return true
}

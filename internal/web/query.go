package web

import (
	"maps"
	"net/url"
	"strings"
)

// maxPlainQueryParams bounds the queries QueryInto splits itself; longer ones go through
// net/url, which enforces its own bound on their number.
const maxPlainQueryParams = 16

// QueryInto fills q, empty, with the query rawQuery as url.ParseQuery reads it (what
// r.URL.Query() answers), so that a handler can make q itself: a map made with
// make(url.Values, n) that does not outlive the handler stays on its stack, where
// r.URL.Query() allocates one per request. A query with nothing to unescape ('%', '+') or
// refuse (';') and a few parameters is split here; any other goes through url.ParseQuery, and
// a pair that it drops (a bad escape, a semicolon) is dropped here too.
func QueryInto(q url.Values, rawQuery string) {
	if strings.Count(rawQuery, "&") >= maxPlainQueryParams || strings.ContainsAny(rawQuery, "%+;") {
		parsed, _ := url.ParseQuery(rawQuery) // as r.URL.Query(): the pairs it could read
		maps.Copy(q, parsed)
		return
	}
	for rawQuery != "" {
		var pair string
		pair, rawQuery, _ = strings.Cut(rawQuery, "&")
		if pair == "" {
			continue
		}
		key, value, _ := strings.Cut(pair, "=")
		q[key] = append(q[key], value)
	}
}

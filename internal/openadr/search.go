package openadr

import (
	"net/http"
	"strconv"
)

// MaxLimit is the most objects one search answers: the document's maximum for `limit`, and
// its default when `limit` is absent (docs/openadr.md).
const MaxLimit = 50

// search is a search's query: the page (skip, limit) and the targets asked for.
type search struct {
	Skip, Limit  int
	TargetType   string
	TargetValues []string
}

// maxTargetValues bounds how many targetValues one search may name.
const maxTargetValues = MaxLimit

// parseSearch reads the document's search parameters: skip ≥ 0, 0 ≤ limit ≤ MaxLimit
// (MaxLimit when absent), targetType, and targetValues (repeated, or comma-separated as
// OpenAPI's form style spells an array; at most maxTargetValues).
func parseSearch(r *http.Request) (search, error) {
	q := r.URL.Query()
	s := search{Limit: MaxLimit, TargetType: q.Get("targetType")}
	if v := q.Get("skip"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return s, badRequest("skip must be a whole number, 0 or more (got %q)", v)
		}
		s.Skip = int(n)
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 || n > MaxLimit {
			return s, badRequest("limit must be a whole number from 0 to %d (got %q)", MaxLimit, v)
		}
		s.Limit = int(n)
	}
	for _, v := range q["targetValues"] {
		for _, part := range splitComma(v) {
			if len(s.TargetValues) == maxTargetValues {
				return s, badRequest("targetValues names at most %d values", maxTargetValues)
			}
			s.TargetValues = append(s.TargetValues, part)
		}
	}
	if len(s.TargetValues) > 0 && s.TargetType == "" {
		return s, badRequest("targetValues needs targetType")
	}
	return s, nil
}

func splitComma(v string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(v); i++ {
		if i == len(v) || v[i] == ',' {
			if i > start {
				out = append(out, v[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// page is items[skip : skip+limit], within bounds.
func page[T any](items []T, s search) []T {
	if s.Skip >= len(items) {
		return []T{}
	}
	items = items[s.Skip:]
	if len(items) > s.Limit {
		items = items[:s.Limit]
	}
	return items
}

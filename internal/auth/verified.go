package auth

import (
	"crypto/sha256"
	"slices"
	"sync"
	"time"
)

// verifiedTokens remembers tokens whose signature and claims were checked, so a client's
// every request does not pay an Ed25519 verification (half of a cached read's CPU, measured).
// Entries are keyed by the token's SHA-256 (the token itself is not kept), hold the validity
// window the claims gave (not before iat - leeway, not past exp) and the signing key's id, and
// live for verifiedTTL at most: a hit is honoured only inside that window and while the key is
// still in the ring, so a removed key stops its tokens at once. The check that the API client
// is still active runs on every request regardless (Authenticator.ClientActive).
type verifiedTokens struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]verifiedToken
}

type verifiedToken struct {
	principal *Principal
	kid       string
	notBefore time.Time
	until     time.Time
}

const (
	verifiedTTL        = time.Minute
	maxVerifiedEntries = 50_000
)

// tokenKey is a token's SHA-256. A token that fits goes through a buffer on the stack: the
// []byte(token) copy was a tenth of a cached read's allocations, and garbage collection is
// paid per byte allocated.
func tokenKey(token string) [sha256.Size]byte {
	var buf [1024]byte
	if len(token) <= len(buf) {
		return sha256.Sum256(append(buf[:0], token...))
	}
	return sha256.Sum256([]byte(token))
}

// get returns the cached principal of a token verified before, with its key id. The
// principal is the cache's own, shared by every request with the token: read-only (a copy
// per request was a twentieth of a cached read's allocations).
func (v *verifiedTokens) get(token string, now time.Time) (*Principal, string, bool) {
	key := tokenKey(token)
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.entries[key]
	if !ok || now.Before(e.notBefore) || !now.Before(e.until) {
		return nil, "", false
	}
	return e.principal, e.kid, true
}

func (v *verifiedTokens) put(token string, p *Principal, kid string, notBefore, expires, now time.Time) {
	until := now.Add(verifiedTTL)
	if expires.Before(until) {
		until = expires
	}
	key := tokenKey(token)
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.entries == nil {
		v.entries = map[[sha256.Size]byte]verifiedToken{}
	}
	if len(v.entries) >= maxVerifiedEntries {
		for k, e := range v.entries {
			if !now.Before(e.until) {
				delete(v.entries, k)
			}
		}
		if len(v.entries) >= maxVerifiedEntries {
			clear(v.entries) // a flood of distinct valid tokens: start over rather than grow
		}
	}
	v.entries[key] = verifiedToken{principal: p.clone(), kid: kid, notBefore: notBefore, until: until}
}

// clone copies a principal into the cache, so that the caller's copy and the cached one are
// never the same.
func (p *Principal) clone() *Principal {
	c := *p
	c.Roles = slices.Clone(p.Roles)
	return &c
}

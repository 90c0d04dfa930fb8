package web

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/flexsite/flexsite/internal/metrics"
)

// Limits bound what one caller can ask of Flexsite, so a flood from one client gets 429s
// instead of taking the service down, and password guessing slows to a crawl. A zero Limit
// disables that limit.
type Limits struct {
	// PerClient bounds the requests of one API client (organisation token) or end user.
	PerClient Limit
	// AuthFailuresPerAddress bounds failed bearer-token authentications from one address.
	AuthFailuresPerAddress Limit
	// LoginFailuresPerUsername and LoginFailuresPerAddress bound failed logins at
	// /auth/token-form; once exhausted, the endpoint answers 429 without checking passwords.
	LoginFailuresPerUsername Limit
	LoginFailuresPerAddress  Limit
	// CallbackFailuresPerAddress bounds the device authorisation callbacks from one address
	// whose state is not one in progress (GET /oauth/callback takes no token: the state is the
	// proof); once exhausted, the callback answers 429 without looking the state up.
	CallbackFailuresPerAddress Limit
}

// Limit is a token bucket: Burst at once, refilled at Rate per second.
type Limit struct {
	Rate  float64
	Burst int
}

// DefaultLimits are the manager's defaults.
var DefaultLimits = Limits{
	PerClient:                Limit{Rate: 100, Burst: 200},
	AuthFailuresPerAddress:   Limit{Rate: 5, Burst: 100},
	LoginFailuresPerUsername: Limit{Rate: 1.0 / 30, Burst: 10},
	LoginFailuresPerAddress:  Limit{Rate: 1, Burst: 50},
	// A household comes back once per authorisation, with a state it was given: only a
	// guesser (or a flood) fails many times.
	CallbackFailuresPerAddress: Limit{Rate: 1, Burst: 20},
}

// KeyedLimiter holds one token bucket per key (client, address, username). Buckets idle for
// long are dropped, so the map does not grow with every address ever seen.
type KeyedLimiter struct {
	limit Limit
	mu    sync.Mutex
	byKey map[string]*bucket
	swept time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

const bucketIdleAfter = 10 * time.Minute

func NewKeyedLimiter(l Limit) *KeyedLimiter {
	if l.Rate <= 0 || l.Burst <= 0 {
		return nil
	}
	return &KeyedLimiter{limit: l, byKey: map[string]*bucket{}}
}

func (k *KeyedLimiter) get(key string, now time.Time) *rate.Limiter {
	return k.getKey([]byte(key), now)
}

// getKey is get of a key in bytes: looking it up copies nothing (only a new key is kept, as
// a string).
func (k *KeyedLimiter) getKey(key []byte, now time.Time) *rate.Limiter {
	k.mu.Lock()
	defer k.mu.Unlock()
	if now.Sub(k.swept) > bucketIdleAfter {
		for key, b := range k.byKey {
			if now.Sub(b.seen) > bucketIdleAfter {
				delete(k.byKey, key)
			}
		}
		k.swept = now
	}
	b, ok := k.byKey[string(key)]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(k.limit.Rate), k.limit.Burst)}
		k.byKey[string(key)] = b
	}
	b.seen = now
	return b.lim
}

// allow takes a token for key, reporting whether one was there (nil limiter: always).
func (k *KeyedLimiter) Allow(key string) bool {
	if k == nil {
		return true
	}
	return k.get(key, time.Now()).Allow()
}

// allowKey is Allow of a key in bytes, which it does not keep (nil limiter: always, and
// the key is not looked at).
func (k *KeyedLimiter) allowKey(key []byte) bool {
	if k == nil {
		return true
	}
	return k.getKey(key, time.Now()).Allow()
}

// exhausted reports whether key has no token left, without taking one: for limits that are
// charged only on failure.
func (k *KeyedLimiter) Exhausted(key string) bool {
	if k == nil {
		return false
	}
	return k.get(key, time.Now()).Tokens() < 1
}

// charge takes a token for key if there is one.
func (k *KeyedLimiter) Charge(key string) {
	if k != nil {
		k.get(key, time.Now()).Allow()
	}
}

// retryAfter is how long until key has a token again, in whole seconds (at least 1).
func (k *KeyedLimiter) RetryAfter() string {
	secs := 1
	if k != nil && k.limit.Rate > 0 && k.limit.Rate < 1 {
		secs = int(1/k.limit.Rate + 0.5)
	}
	return strconv.Itoa(secs)
}

// TooManyRequests is the 429 of limit k (named for the metrics).
func TooManyRequests(k *KeyedLimiter, limit string) error {
	metrics.RateLimited.WithLabelValues(limit).Inc()
	return &Error{Status: http.StatusTooManyRequests, Detail: "Too many requests; retry later",
		Headers: map[string]string{HeaderRetryAfter: k.RetryAfter()}}
}

// ClientAddress is the address of the client a request comes from: the connection's, unless
// that is a trusted proxy (one of trusted); then the nearest address in Forwarded or
// X-Forwarded-For that is not a trusted proxy itself. Anyone else's headers are ignored: a
// client cannot choose whose limits it spends.
func ClientAddress(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	isTrusted := func(a string) bool {
		ip, err := netip.ParseAddr(a)
		if err != nil {
			return false
		}
		ip = ip.Unmap()
		for _, p := range trusted {
			if p.Contains(ip) {
				return true
			}
		}
		return false
	}
	if !isTrusted(host) {
		return host
	}
	hops := forwardedFor(r)
	// Right to left: the right-most entries were added by our own proxies.
	for i := len(hops) - 1; i >= 0; i-- {
		if !isTrusted(hops[i]) {
			return hops[i]
		}
	}
	return host
}

// forwardedFor lists the client addresses of the Forwarded header (RFC 7239, for=), or else
// of X-Forwarded-For, in order.
func forwardedFor(r *http.Request) []string {
	var hops []string
	for _, line := range r.Header.Values("Forwarded") {
		for _, elem := range strings.Split(line, ",") {
			for _, pair := range strings.Split(elem, ";") {
				k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if !ok || !strings.EqualFold(k, "for") {
					continue
				}
				v = strings.Trim(v, `"`)
				if h, _, err := net.SplitHostPort(v); err == nil {
					v = h
				}
				hops = append(hops, strings.Trim(v, "[]"))
			}
		}
	}
	if len(hops) > 0 {
		return hops
	}
	for _, line := range r.Header.Values("X-Forwarded-For") {
		for _, a := range strings.Split(line, ",") {
			if a = strings.TrimSpace(a); a != "" {
				hops = append(hops, a)
			}
		}
	}
	return hops
}

// Limiters are the limiters every door shares, built from Limits: one budget per client and
// per address whichever door the request comes through.
type Limiters struct {
	PerClient, AuthFailures, LoginUser, LoginAddress, CallbackFailures *KeyedLimiter
}

// NewLimiters builds the limiters of l.
func NewLimiters(l Limits) *Limiters {
	return &Limiters{
		PerClient:        NewKeyedLimiter(l.PerClient),
		AuthFailures:     NewKeyedLimiter(l.AuthFailuresPerAddress),
		LoginUser:        NewKeyedLimiter(l.LoginFailuresPerUsername),
		LoginAddress:     NewKeyedLimiter(l.LoginFailuresPerAddress),
		CallbackFailures: NewKeyedLimiter(l.CallbackFailuresPerAddress),
	}
}

// TrustedProxies are the networks of the reverse proxies in front of Flexsite: only from them
// is the client's address taken from X-Forwarded-For or Forwarded.
type TrustedProxies []netip.Prefix

// ClientAddress is the address of the client r comes from (ClientAddress).
func (t TrustedProxies) ClientAddress(r *http.Request) string { return ClientAddress(r, t) }

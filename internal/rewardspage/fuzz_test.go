package rewardspage

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/rewards"
	"github.com/flexsite/flexsite/internal/web"
	"github.com/flexsite/flexsite/internal/web/webtest"
)

// lookups is a store that holds nothing, fails every read with webtest.ErrStoreReached, and
// remembers the keys it was asked for.
type lookups struct {
	webtest.UnreachableStore
	keys []client.ObjectKey
}

func (s *lookups) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	s.keys = append(s.keys, key)
	return webtest.ErrStoreReached
}

// fuzzDoor is a rewards page whose use cases read from store.
func fuzzDoor(store *lookups) *Door {
	return &Door{Log: logr.Discard(), Limits: web.NewLimiters(web.Limits{}),
		Rewards: rewards.New(rewards.Config{Log: logr.Discard(), APIReader: store, Cache: store,
			Sites: app.New(app.Config{Log: logr.Discard(), Cache: store, APIReader: store})})}
}

// isLinkSecret reports whether key names a link's Secret: the hosted namespace, the prefix and
// 40 lower-case hex digits (a hash: nothing of the browser's input reaches the name as it is).
func isLinkSecret(key client.ObjectKey) bool {
	hash, ok := strings.CutPrefix(key.Name, rewards.LinkSecretPrefix)
	return ok && key.Namespace == rewards.DefaultHostedNamespace && len(hash) == 40 && strings.Trim(hash, "0123456789abcdef") == ""
}

// FuzzRewardsCookie fuzzes the rewards page's session cookie: a value that cannot name a
// link is refused without reading anything (the page answers 401); one that can is looked up
// by its key only, as a link Secret's name.
func FuzzRewardsCookie(f *testing.F) {
	for _, seed := range []string{
		"", ".", "0123456789abcdef0123456789abcdef01234567.SESSION", "0123456789ABCDEF0123456789ABCDEF01234567.s",
		"../../etc.x", "0123456789abcdef0123456789abcdef01234567.", "a.b.c", "\x00.\xff",
		`"0123456789abcdef0123456789abcdef01234567.s"`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		store := &lookups{}
		d := fuzzDoor(store)
		request := func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/hosted/rewards", nil)
			r.Header.Set("Cookie", cookieName+"="+value)
			return r
		}
		sess, err := d.session(request())
		if sess != nil {
			t.Fatal("a session from a store that holds nothing")
		}
		cookie, cerr := request().Cookie(cookieName)
		key, session := "", ""
		if cerr == nil {
			key, session, _ = strings.Cut(cookie.Value, ".")
		}
		wellFormed := cerr == nil && len(key) == 40 && strings.Trim(key, "0123456789abcdef") == "" && session != ""
		switch {
		case errors.Is(err, webtest.ErrStoreReached) && !wellFormed:
			t.Fatalf("cookie %q reached the store", value)
		case errors.Is(err, rewards.ErrNoLink) && wellFormed:
			t.Fatalf("well-formed cookie %q refused without a lookup", value)
		case err == nil || (!errors.Is(err, webtest.ErrStoreReached) && !errors.Is(err, rewards.ErrNoLink)):
			t.Fatalf("cookie %q: %v", value, err)
		}
		if wellFormed && (len(store.keys) != 1 || store.keys[0].Name != rewards.LinkSecretPrefix+key || !isLinkSecret(store.keys[0])) {
			t.Fatalf("cookie %q looked up %v", value, store.keys)
		}

		// The page: a session ended (401) without a lookup, else the store's failure (500); HTML either way.
		w := httptest.NewRecorder()
		d.page(w, request())
		want := http.StatusUnauthorized
		if wellFormed {
			want = http.StatusInternalServerError
		}
		if w.Code != want || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") || w.Header().Get("Set-Cookie") != "" {
			t.Fatalf("cookie %q: the page answers %d %q (Set-Cookie %q), want %d HTML", value, w.Code,
				w.Header().Get("Content-Type"), w.Header().Get("Set-Cookie"), want)
		}
	})
}

// FuzzRewardsLinkCode fuzzes the one-time code of GET /hosted/rewards/link/{code}: any code is
// looked up by its hash (whatever it holds, the Secret name is the prefix and 40 hex digits),
// and the page answered is HTML, never a panic, and starts no session.
func FuzzRewardsLinkCode(f *testing.F) {
	for _, seed := range []string{"", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "../..", "%00", strings.Repeat("A", 4096), "a/b", "\xff"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, code string) {
		store := &lookups{}
		d := fuzzDoor(store)
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.SetPathValue("code", code)
		w := httptest.NewRecorder()
		d.redeem(w, r)
		if len(store.keys) != 1 || !isLinkSecret(store.keys[0]) {
			t.Fatalf("code %q looked up %v", code, store.keys)
		}
		if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Fatalf("content type %q", ct)
		}
		if w.Code != http.StatusInternalServerError || w.Header().Get("Set-Cookie") != "" || w.Header().Values("Location") != nil {
			t.Fatalf("code %q: %d, Set-Cookie %q, Location %q from a store that holds nothing", code, w.Code,
				w.Header().Get("Set-Cookie"), w.Header().Values("Location"))
		}
	})
}

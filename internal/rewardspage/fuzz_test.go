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
	"github.com/flexsite/flexsite/internal/pagestore"
	"github.com/flexsite/flexsite/internal/rewardstore"
	"github.com/flexsite/flexsite/internal/web"
	"github.com/flexsite/flexsite/internal/web/webtest"
)

// lookups is a store that holds nothing and fails every read with webtest.ErrStoreReached
// (the sites and API clients); the links' database is away (webtest.DownDatabase), so a link
// lookup that gets as far as the database answers Unavailable.
type lookups struct {
	webtest.UnreachableStore
}

func (s *lookups) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return webtest.ErrStoreReached
}

// fuzzDoor is a rewards page whose use cases read from store, with the links' database away.
func fuzzDoor(store *lookups) *Door {
	down := webtest.DownDatabase()
	return &Door{Log: logr.Discard(), Limits: web.NewLimiters(web.Limits{}),
		Rewards: rewards.New(rewards.Config{Log: logr.Discard(), APIReader: store, Cache: store,
			Sites: app.New(app.Config{Log: logr.Discard(), Cache: store, APIReader: store}),
			Store: &rewardstore.Store{Pool: down}, Private: &pagestore.Store{Pool: down}})}
}

// reachedDatabase reports whether err is the links' database being asked (and away).
func reachedDatabase(err error) bool {
	e := app.As(err)
	return e != nil && e.Kind == app.Unavailable
}

// FuzzRewardsCookie fuzzes the rewards page's session cookie: a value that cannot name a
// link is refused without reading anything (the page answers 401); one that can is looked up
// in the links' database (away here: the page answers 503).
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
		case reachedDatabase(err) && !wellFormed:
			t.Fatalf("cookie %q reached the database", value)
		case errors.Is(err, rewards.ErrNoLink) && wellFormed:
			t.Fatalf("well-formed cookie %q refused without a lookup", value)
		case err == nil || (!reachedDatabase(err) && !errors.Is(err, rewards.ErrNoLink)):
			t.Fatalf("cookie %q: %v", value, err)
		}

		// The page: a session ended (401) without a lookup, else the database's absence (503); HTML either way.
		w := httptest.NewRecorder()
		d.page(w, request())
		want := http.StatusUnauthorized
		if wellFormed {
			want = http.StatusServiceUnavailable
		}
		if w.Code != want || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") || w.Header().Get("Set-Cookie") != "" {
			t.Fatalf("cookie %q: the page answers %d %q (Set-Cookie %q), want %d HTML", value, w.Code,
				w.Header().Get("Content-Type"), w.Header().Get("Set-Cookie"), want)
		}
	})
}

// FuzzRewardsLinkCode fuzzes the one-time code of GET /hosted/rewards/link/{code}: any code is
// looked up by its hash (whatever it holds, it reaches the links' database, away here: 503),
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
		if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Fatalf("content type %q", ct)
		}
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Set-Cookie") != "" || w.Header().Values("Location") != nil {
			t.Fatalf("code %q: %d, Set-Cookie %q, Location %q from a store that holds nothing", code, w.Code,
				w.Header().Get("Set-Cookie"), w.Header().Values("Location"))
		}
	})
}

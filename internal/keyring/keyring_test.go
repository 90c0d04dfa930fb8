package keyring_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/keyring"
	"github.com/flexsite/flexsite/internal/testenv"
)

// env is the API server the tests share; nil when KUBEBUILDER_ASSETS is unset, and then the
// tests that need it skip.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.MainShared(m, &env) }

func newNamespace(t *testing.T) string { return testenv.SharedNamespace(t, env) }

// words is a Kind whose keys are their own text: any non-empty value.
var words = keyring.Kind[string]{
	What: "test",
	Parse: func(v []byte) (string, error) {
		if len(v) == 0 {
			return "", errors.New("empty")
		}
		return string(v), nil
	},
	New: func() ([]byte, error) { return []byte("fresh"), nil },
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name       string
		data       map[string][]byte
		wantActive string
		wantKeys   int
	}{
		{name: "two keys", data: map[string][]byte{"a.key": []byte("A"), "b.key": []byte("B"), "active": []byte("b")}, wantActive: "b", wantKeys: 2},
		{name: "active with a newline", data: map[string][]byte{"a.key": []byte("A"), "active": []byte("a\n")}, wantActive: "a", wantKeys: 1},
		{name: "other entries ignored", data: map[string][]byte{"a.key": []byte("A"), "a.retired": []byte("x"), "active": []byte("a")}, wantActive: "a", wantKeys: 1},
		{name: "no keys", data: map[string][]byte{}},
		{name: "active names no key", data: map[string][]byte{"a.key": []byte("A"), "active": []byte("b")}},
		{name: "a key without an id", data: map[string][]byte{".key": []byte("A"), "active": []byte("")}},
		{name: "one good, one broken key", data: map[string][]byte{"a.key": []byte("A"), "b.key": nil, "active": []byte("a")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, active, err := keyring.Parse(tc.data, words.Parse)
			if tc.wantActive == "" {
				if err == nil {
					t.Fatalf("accepted: %v, %q", keys, active)
				}
				return
			}
			if err != nil || active != tc.wantActive || len(keys) != tc.wantKeys {
				t.Fatalf("Parse = %v, %q, %v; want %d keys, active %q", keys, active, err, tc.wantKeys, tc.wantActive)
			}
		})
	}
}

// step is one Find at a time after t0, with the Secret's data set first (when data is set),
// and what it must answer and cost.
type step struct {
	at        time.Duration
	secret    map[string][]byte // written before the Find (nil: left as it is)
	kid       string
	want      string // the key found; "" when Find must fail
	unknown   bool   // the failure is ErrUnknownKey
	wantReads int32
}

// The one rule of an unknown key id: a reload at most once per ReloadInterval, a failed reload
// told as such, a ring never loaded loaded by its first use.
func TestFindReloadRule(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ab := map[string][]byte{"a.key": []byte("A"), "b.key": []byte("B"), "active": []byte("a")}
	broken := map[string][]byte{"a.key": []byte("A"), "active": []byte("z")}
	for _, tc := range []struct {
		name   string
		secret map[string][]byte // the Secret before the ring loads (nil: none)
		ensure bool              // the ring is loaded by Ensure before the steps
		steps  []step
	}{
		{name: "a held key costs no read", secret: ab, ensure: true, steps: []step{
			{kid: "b", want: "B"},
		}},
		{name: "an unknown id reloads once per interval", secret: map[string][]byte{"a.key": []byte("A"), "active": []byte("a")}, ensure: true, steps: []step{
			{kid: "x", unknown: true, wantReads: 1},
			{kid: "y", unknown: true},
			{at: keyring.ReloadInterval - time.Second, secret: map[string][]byte{"a.key": []byte("A"), "x.key": []byte("X"), "active": []byte("a")}, kid: "x", unknown: true},
			{at: keyring.ReloadInterval, kid: "x", want: "X", wantReads: 1},
			{at: keyring.ReloadInterval, kid: "x", want: "X"},
		}},
		{name: "a removed key is unknown after the next reload", secret: ab, ensure: true, steps: []step{
			{secret: map[string][]byte{"b.key": []byte("B"), "active": []byte("b")}, kid: "c", unknown: true, wantReads: 1},
			{at: time.Second, kid: "a", unknown: true},
		}},
		{name: "a Secret that no longer parses is an error, not an unknown key, and the ring keeps its keys", secret: ab, ensure: true, steps: []step{
			{secret: broken, kid: "x", wantReads: 1},
			{kid: "b", want: "B"},
			{at: time.Second, kid: "x", unknown: true},
		}},
		{name: "a ring never loaded loads on its first use", secret: ab, steps: []step{
			{kid: "b", want: "B", wantReads: 1},
		}},
		{name: "a ring never loaded creates its Secret on its first use", steps: []step{
			{kid: "x", unknown: true, wantReads: 2}, // NotFound, then the read after the Create
		}},
		{name: "a ring that cannot load tries once per interval", secret: broken, steps: []step{
			{kid: "a", wantReads: 1},
			{at: time.Second, kid: "a"},
			{at: keyring.ReloadInterval, secret: ab, kid: "a", want: "A", wantReads: 1},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			key := client.ObjectKey{Namespace: ns, Name: "keys"}
			if tc.secret != nil {
				if err := env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name}, Data: tc.secret}); err != nil {
					t.Fatal(err)
				}
			}
			reader := &testenv.CountingReader{Reader: env.Client}
			ring := keyring.New(reader, env.Client, ns, key.Name, words)
			if tc.ensure {
				if err := ring.Ensure(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			for i, s := range tc.steps {
				if s.secret != nil {
					secret := &corev1.Secret{}
					if err := env.Client.Get(t.Context(), key, secret); err != nil {
						t.Fatal(err)
					}
					secret.Data = s.secret
					if err := env.Client.Update(t.Context(), secret); err != nil {
						t.Fatal(err)
					}
				}
				before := reader.Gets()
				got, err := ring.Find(t.Context(), s.kid, t0.Add(s.at))
				if reads := reader.Gets() - before; reads != s.wantReads {
					t.Errorf("step %d: %d reads of the Secret, want %d", i, reads, s.wantReads)
				}
				switch {
				case s.want != "":
					if err != nil || got != s.want {
						t.Errorf("step %d: Find(%q) = %q, %v; want %q", i, s.kid, got, err, s.want)
					}
				case err == nil:
					t.Errorf("step %d: Find(%q) = %q, want an error", i, s.kid, got)
				case errors.Is(err, keyring.ErrUnknownKey) != s.unknown:
					t.Errorf("step %d: Find(%q) = %v; ErrUnknownKey: %v, want %v", i, s.kid, err, !s.unknown, s.unknown)
				}
			}
		})
	}
}

// Callers that meet a new key at once all get it, for one read: each one that waited for
// another's reload looks again before it counts as one (without that look, all but the first
// would be refused a key the ring holds).
func TestFindWaitersSeeAnotherCallersReload(t *testing.T) {
	ns := newNamespace(t)
	if err := env.Client.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "keys"},
		Data: map[string][]byte{"a.key": []byte("A"), "active": []byte("a")}}); err != nil {
		t.Fatal(err)
	}
	reader := &testenv.CountingReader{Reader: env.Client}
	ring := keyring.New(reader, env.Client, ns, "keys", words)
	if err := ring.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{}
	if err := env.Client.Get(t.Context(), ring.Secret(), secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["n.key"] = []byte("N")
	if err := env.Client.Update(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	before := reader.Gets()
	now := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() { _, errs[i] = ring.Find(t.Context(), "n", now) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Errorf("callers refused the new key: %v", err)
	}
	if reads := reader.Gets() - before; reads != 1 {
		t.Errorf("%d reads of the Secret, want 1", reads)
	}
}

// A ring without a Secret is filled by Load only, and never reads.
func TestRingWithoutSecret(t *testing.T) {
	ring := keyring.New[string](nil, nil, "", "", words)
	if _, _, err := ring.Active(); err == nil {
		t.Fatal("an empty ring has an active key")
	}
	if err := ring.Load(map[string][]byte{"a.key": []byte("A"), "active": []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if kid, key, err := ring.Active(); err != nil || kid != "a" || key != "A" {
		t.Fatalf("Active = %q, %q, %v", kid, key, err)
	}
	if _, err := ring.Find(t.Context(), "b", time.Now()); !errors.Is(err, keyring.ErrUnknownKey) {
		t.Fatalf("Find(unknown) = %v, want ErrUnknownKey", err)
	}
	if err := ring.Load(map[string][]byte{"a.key": []byte("A"), "active": []byte("b")}); err == nil {
		t.Fatal("Load accepted a broken Secret")
	}
	if got := ring.Held(); len(got) != 1 || got[0] != "a" {
		t.Fatalf("after a refused Load the ring holds %v, want [a]", got)
	}
}

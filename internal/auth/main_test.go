package auth

import (
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flexsite/flexsite/internal/testenv"
)

// env is the API server the tests share; nil when KUBEBUILDER_ASSETS is unset, and then the
// tests that need it skip.
var env *testenv.Env

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard())
	os.Exit(testenv.RunShared(m, &env))
}

// needEnv returns the shared API server, or skips the test without one.
func needEnv(t *testing.T) *testenv.Env {
	t.Helper()
	if env == nil {
		t.Skip("KUBEBUILDER_ASSETS is not set: run `make test`")
	}
	return env
}

// newNamespace creates a namespace of the test's own.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns, err := needEnv(t).Namespace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// newRing returns a loaded key ring kept in a Secret of a fresh namespace.
func newRing(t *testing.T) *KeyRing {
	t.Helper()
	ring := NewKeyRing(env.Client, env.Client, newNamespace(t), "signing-keys")
	if err := ring.Ensure(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ring
}

// clock is a settable clock for the issuer.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time          { return c.now }
func (c *clock) Advance(d time.Duration) { c.now = c.now.Add(d) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// eventually retries check until it succeeds or ten seconds pass: the cache sees a write a
// moment after the API server acknowledged it.
func eventually(t *testing.T, check func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

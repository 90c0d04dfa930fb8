package testenv

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// RunShared runs a package's tests with one API server they share, set into *env while they
// run, and answers their exit code (for TestMain's os.Exit). Without KUBEBUILDER_ASSETS it runs
// them with *env nil: the tests that need the API server skip (`make test` sets it).
func RunShared(m *testing.M, env **Env) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return m.Run()
	}
	e, err := Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the API server:", err)
		return 1
	}
	defer func() {
		if err := e.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the API server:", err)
		}
	}()
	*env = e
	return m.Run()
}

// SharedNamespace is a fresh namespace of the shared API server (RunShared's env) for one
// test, which skips when there is none.
func SharedNamespace(t testing.TB, env *Env) string {
	t.Helper()
	if env == nil {
		t.Skip("KUBEBUILDER_ASSETS is not set: run `make test`")
	}
	ns, err := env.Namespace(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// MainShared is the whole of a TestMain whose tests share one API server (RunShared): the
// controller-runtime log discarded, and the tests' exit code.
func MainShared(m *testing.M, env **Env) {
	logf.SetLogger(logr.Discard())
	os.Exit(RunShared(m, env))
}

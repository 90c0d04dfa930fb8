package sealing_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flexsite/flexsite/internal/testenv"
)

// env is the API server the rotation tests share; nil when KUBEBUILDER_ASSETS is unset, and
// then they skip.
var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	logf.SetLogger(logr.Discard())
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return m.Run()
	}
	e, err := testenv.Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the API server:", err)
		return 1
	}
	defer func() {
		if err := e.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the API server:", err)
		}
	}()
	env = e
	return m.Run()
}

// newNamespace is a namespace of the test's own (the test skips without an API server).
func newNamespace(t *testing.T) string {
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

package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/flexsite/flexsite/internal/index"
)

// Skip is an error a MainCached build answers to skip the package's tests (saying why), for
// example when there is no PostgreSQL here outside CI.
type Skip string

func (s Skip) Error() string { return string(s) }

// Skipping is Skip as a function (dbtest.ForMain's skip).
func Skipping(message string) error { return Skip(message) }

// MainCached is the whole TestMain of a use-case package: one API server for its tests, and a
// manager whose cache is indexed as cmd/manager's (index.Register) and started, so that the
// use cases read as they do in production. build runs before the cache starts (it may add
// informers and indexes): it builds the use cases on env and mgr and answers what to undo
// after the tests (nil: nothing), or an error (a Skip: what it needs is missing here). The
// tests run in every case, so that a package's pure tests run alone: without
// KUBEBUILDER_ASSETS (`make test` sets it), or after a Skip, those that need the API server
// skip (SharedNamespace, on the env a build sets only once it succeeds).
func MainCached(m *testing.M, build func(ctx context.Context, env *Env, mgr ctrl.Manager) (func(), error)) {
	logf.SetLogger(logr.Discard())
	os.Exit(runCached(m, true, build))
}

// MainReconciled is MainCached for a package whose build also runs reconcilers on the
// manager: build registers the cache's indexes itself, with the reconcilers, as cmd/manager
// does (controllers.SetupWithManager registers them; a second registration is refused).
func MainReconciled(m *testing.M, build func(ctx context.Context, env *Env, mgr ctrl.Manager) (func(), error)) {
	logf.SetLogger(logr.Discard())
	os.Exit(runCached(m, false, build))
}

func runCached(m *testing.M, indexed bool, build func(ctx context.Context, env *Env, mgr ctrl.Manager) (func(), error)) int {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return m.Run()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	env, err := Start(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the API server:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the API server:", err)
		}
	}()
	mgr, err := env.NewManager()
	if err == nil && indexed {
		err = index.Register(ctx, mgr.GetFieldIndexer())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "building the manager:", err)
		return 1
	}
	undo, err := build(ctx, env, mgr)
	if undo != nil {
		defer undo()
	}
	var skip Skip
	if errors.As(err, &skip) {
		fmt.Println(skip)
		return m.Run()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "building the use cases:", err)
		return 1
	}
	started := make(chan error, 1)
	go func() { started <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "the manager's cache did not sync:", <-started)
		return 1
	}
	code := m.Run()
	cancel()
	if err := <-started; err != nil {
		fmt.Fprintln(os.Stderr, "the manager stopped:", err)
	}
	return code
}

// Package apptest is what the use-case packages' own tests share (docs/development.md,
// "Flakes"): one API server, an indexed cache and one PostgreSQL database a package, the
// household use cases built on them as cmd/manager builds them, and an organisation's
// principal. Only tests import it.
package apptest

import (
	"context"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/testenv"
)

// Households are the household use cases on mgr's cache and clients, as cmd/manager builds them.
func Households(mgr ctrl.Manager) *app.Service {
	return app.New(app.Config{Log: logr.Discard(), Cache: mgr.GetCache(), APIReader: mgr.GetAPIReader(),
		Client: mgr.GetClient()})
}

// MainWithDatabase is the whole TestMain of a use-case package that keeps data in PostgreSQL
// (testenv.MainCached with the package's database, dbtest.ForMain): build makes the package's
// use case on the household use cases and the database, which is closed after the tests.
func MainWithDatabase(m *testing.M, build func(ctx context.Context, env *testenv.Env, households *app.Service,
	database *dbtest.Database) error) {
	testenv.MainCached(m, withDatabase(nil, build))
}

// MainWithReconcilers is MainWithDatabase for a package whose use cases wait on what a
// controller computes (a Site's eligibility in its status, an Enrolment's phase, a Site's
// finalizer): reconcile adds the reconcilers to the manager on the package's database before
// the use cases are built, and registers the cache's indexes with them, as cmd/manager's
// wiring does. The package passes controllers.SetupWithManager in: apptest, a helper below
// the doors, does not import controllers (test/architecture).
func MainWithReconcilers(m *testing.M, reconcile func(ctx context.Context, mgr ctrl.Manager, database *dbtest.Database) error,
	build func(ctx context.Context, env *testenv.Env, households *app.Service, database *dbtest.Database) error) {
	testenv.MainReconciled(m, withDatabase(reconcile, build))
}

// withDatabase is a testenv build that opens the package's database, runs reconcile on it
// (when set) and then build.
func withDatabase(reconcile func(ctx context.Context, mgr ctrl.Manager, database *dbtest.Database) error,
	build func(ctx context.Context, env *testenv.Env, households *app.Service, database *dbtest.Database) error) func(
	ctx context.Context, env *testenv.Env, mgr ctrl.Manager) (func(), error) {
	return func(ctx context.Context, env *testenv.Env, mgr ctrl.Manager) (func(), error) {
		d, err := dbtest.ForMain(ctx, testenv.Skipping)
		if err != nil {
			return nil, err
		}
		closeDB := func() { d.Close(context.Background()) }
		if reconcile != nil {
			if err := reconcile(ctx, mgr, d); err != nil {
				return closeDB, err
			}
		}
		if err := build(ctx, env, Households(mgr), d); err != nil {
			return closeDB, err
		}
		return closeDB, nil
	}
}

// Organisation is the principal of the API client named client in a fresh organisation of
// env's (testenv.SharedNamespace), holding roles: entity_read and entity_write when none are
// given.
func Organisation(t testing.TB, env *testenv.Env, client string, roles ...flexv1.Role) *auth.Principal {
	t.Helper()
	if len(roles) == 0 {
		roles = []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite}
	}
	ns := testenv.SharedNamespace(t, env)
	return &auth.Principal{Kind: auth.KindOrganisation, Namespace: ns, ClientName: client, Username: client + "-" + ns,
		Roles: roles}
}

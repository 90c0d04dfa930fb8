// Package leastprivilege proves the manager's RBAC for real: the API server's RBAC
// authoriser judges a client that impersonates the manager's ServiceAccount, bound as the
// installer binds it to the roles `make manifests` generates (config/rbac). The other suites
// run the manager with an administrator's credentials, which prove nothing about its access.
package leastprivilege_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/controllers/organisation"
	"github.com/flexsite/flexsite/internal/app/meterpoints"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/pagestore"
	"github.com/flexsite/flexsite/internal/sealing"
	"github.com/flexsite/flexsite/internal/testenv"
)

const (
	// As config/default installs it: namePrefix flexsite-, namespace flexsite-system.
	managerNamespace = "flexsite-system"
	serviceAccount   = "flexsite-controller-manager"
	prefix           = "flexsite-"
)

// installRBAC creates the generated roles (config/rbac/role.yaml) and the organisation
// Secrets ClusterRole as kustomize would name them, and binds the ServiceAccount to the
// manager's roles as config/rbac/role_binding.yaml does.
func installRBAC(t *testing.T, admin client.Client) {
	t.Helper()
	ctx := t.Context()
	for _, file := range []string{"role.yaml", "organisation_secrets_role.yaml"} {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", file))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatal(err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			obj.SetName(prefix + obj.GetName())
			if obj.GetKind() == "Role" {
				obj.SetNamespace(managerNamespace)
			}
			if err := admin.Create(ctx, obj); err != nil {
				t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: managerNamespace, Name: serviceAccount}}
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: serviceAccount}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: prefix + "manager-rolebinding"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: prefix + "manager-role"},
			Subjects: subject},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: prefix + "manager-rolebinding"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: prefix + "manager-role"},
			Subjects: subject},
	} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
}

// impersonating is cfg as the manager's ServiceAccount.
func impersonating(cfg *rest.Config) *rest.Config {
	sa := rest.CopyConfig(cfg)
	sa.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + managerNamespace + ":" + serviceAccount}
	return sa
}

// asManager is a client with the manager's ServiceAccount's rights, and no more.
func asManager(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(impersonating(cfg), client.Options{Scheme: testenv.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func secret(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"k": []byte("v")}}
}

func mustForbid(t *testing.T, what string, err error) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %v, want Forbidden", what, err)
	}
}

func mustAllow(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v, want allowed", what, err)
	}
}

// start brings up an API server with the manager's RBAC installed, its namespace and a
// namespace that is no organisation's ("elsewhere").
func start(t *testing.T) *testenv.Env {
	t.Helper()
	env, err := testenv.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	for _, ns := range []string{managerNamespace, "elsewhere"} {
		if err := env.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	installRBAC(t, env.Client)
	return env
}

// database is a fresh PostgreSQL for the manager: it has no mode without one.
func database(t *testing.T) *dbtest.Database {
	t.Helper()
	if err := dbtest.Available(); err != nil {
		fail, msg := dbtest.MissingVerdict(err)
		if fail {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	d, err := dbtest.New(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(context.Background()) })
	return d
}

func TestManagerReachesOnlyItsOwnAndOrganisationsSecrets(t *testing.T) {
	ctx := t.Context()
	env := start(t)
	admin := env.Client
	manager := asManager(t, env.Config)

	// A Secret of a namespace that is no organisation's, and an organisation's credentials.
	if err := admin.Create(ctx, secret("elsewhere", "not-flexsites")); err != nil {
		t.Fatal(err)
	}
	const org = "org-least-privilege"
	if err := bootstrap.EnsureOrganisation(ctx, admin, bootstrap.Organisation{Namespace: org, Username: "lp",
		Password: "a password", Roles: []flexv1.Role{flexv1.RoleEntityRead}}); err != nil {
		t.Fatal(err)
	}
	credentials := client.ObjectKey{Namespace: org, Name: "lp-credentials"}

	// Before the organisation's bootstrap, the manager reaches none of it.
	mustForbid(t, "get an organisation's Secret before its bootstrap", manager.Get(ctx, credentials, &corev1.Secret{}))

	// The bootstrap, run as the manager: RBAC lets it bind itself to the organisation Secrets
	// ClusterRole (it holds bind on it), in this namespace.
	access := bootstrap.OrganisationAccess{ServiceAccountNamespace: managerNamespace, ServiceAccountName: serviceAccount}
	reconciler := &organisation.Reconciler{Client: manager, APIReader: manager, Access: access}
	if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: org}}); err != nil {
		t.Fatalf("the organisation's bootstrap as the manager: %v", err)
	}
	// ... and again, changing nothing.
	if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: org}}); err != nil {
		t.Fatalf("the bootstrap again: %v", err)
	}
	// A namespace without the organisation label gets nothing.
	if _, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: "elsewhere"}}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "elsewhere", Name: bootstrap.OrganisationSecretsBinding}, &rbacv1.RoleBinding{}); !apierrors.IsNotFound(err) {
		t.Errorf("a RoleBinding in a namespace that is no organisation's: %v", err)
	}

	// In the organisation: get, create, update and delete by name.
	got := &corev1.Secret{}
	mustAllow(t, "get the organisation's credentials", manager.Get(ctx, credentials, got))
	s := secret(org, "subscription-signing")
	mustAllow(t, "create a Secret in the organisation", manager.Create(ctx, s))
	s.Data["k"] = []byte("w")
	mustAllow(t, "update it", manager.Update(ctx, s))
	mustAllow(t, "delete it", manager.Delete(ctx, s))

	// Nowhere else; never a list or a watch, not even in the organisation.
	mustForbid(t, "get a Secret of a namespace that is no organisation's", manager.Get(ctx, client.ObjectKey{Namespace: "elsewhere", Name: "not-flexsites"}, &corev1.Secret{}))
	mustForbid(t, "create a Secret there", manager.Create(ctx, secret("elsewhere", "planted")))
	mustForbid(t, "list Secrets cluster-wide", manager.List(ctx, &corev1.SecretList{}))
	mustForbid(t, "list the organisation's Secrets", manager.List(ctx, &corev1.SecretList{}, client.InNamespace(org)))
	mustForbid(t, "get a Secret of kube-system", manager.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "x"}, &corev1.Secret{}))

	// It cannot grant itself anything else: a RoleBinding to a ClusterRole it does not hold
	// (the API server's escalation check), even one that it may bind, in kube-system.
	mustForbid(t, "bind itself to cluster-admin in another namespace", manager.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "escalate"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   access.RoleBinding("elsewhere").Subjects}))
	if err := bootstrap.EnsureOrganisationAccess(ctx, manager, manager, "kube-system", access); err == nil {
		t.Error("the manager bound itself to the Secrets of kube-system")
	}

	// Its own namespace: the token signing keys, the bank details keys and the meter reference
	// keys, created and read.
	keys := auth.NewKeyRing(manager, manager, managerNamespace, "flexsite-token-keys")
	mustAllow(t, "the token signing keys", keys.Ensure(ctx))
	bankKeys := sealing.NewKeyRing(manager, manager, managerNamespace, pagestore.DefaultKeysSecret, "bank details")
	mustAllow(t, "the bank details keys", bankKeys.Ensure(ctx))
	meterRefKeys := sealing.NewKeyRing(manager, manager, managerNamespace, meterpoints.DefaultKeysSecret, "meter references")
	mustAllow(t, "the meter reference keys", meterRefKeys.Ensure(ctx))
	rotation := meterpoints.KeyRotation(meterpoints.DefaultKeyRotation)
	mustAllow(t, "start the meter reference keys' rotation clock", meterRefKeys.Rotate(ctx, rotation, time.Now()))
	mustAllow(t, "rotate the meter reference keys", meterRefKeys.Rotate(ctx, rotation, time.Now().Add(rotation.Every)))
	mustForbid(t, "list the Secrets of its own namespace", manager.List(ctx, &corev1.SecretList{}, client.InNamespace(managerNamespace)))
}

// The manager itself, run as its ServiceAccount: its caches sync (no informer needs a right it
// lacks: none of Secrets), and its Organisation controller makes an organisation's Secrets
// readable as soon as the organisation's namespace appears.
func TestManagerRunsOnItsOwnRBAC(t *testing.T) {
	ctx := t.Context()
	env := start(t)
	asSA := *env
	asSA.Config = impersonating(env.Config)
	mgr, err := asSA.NewManager()
	if err != nil {
		t.Fatal(err)
	}
	access := bootstrap.OrganisationAccess{ServiceAccountNamespace: managerNamespace, ServiceAccountName: serviceAccount}
	if err := controllers.SetupWithManager(ctx, mgr, controllers.Options{DB: database(t).Pool, OrganisationAccess: access}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatal("the manager's caches did not sync on its own RBAC")
	}

	const org = "org-bootstrapped"
	if err := bootstrap.EnsureOrganisation(ctx, env.Client, bootstrap.Organisation{Namespace: org, Username: "boot",
		Password: "a password", Roles: []flexv1.Role{flexv1.RoleEntityRead}}); err != nil {
		t.Fatal(err)
	}
	manager := asManager(t, env.Config)
	// Forbidden until the Organisation controller's RoleBinding is in force; any other error ends the wait.
	var lastErr error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		lastErr = manager.Get(ctx, client.ObjectKey{Namespace: org, Name: "boot-credentials"}, &corev1.Secret{})
		if lastErr != nil && !apierrors.IsForbidden(lastErr) {
			return false, lastErr
		}
		return lastErr == nil, nil
	}); err != nil {
		t.Fatalf("the organisation's credentials, as the manager: %v (last: %v)", err, lastErr)
	}
	mustForbid(t, "a Secret elsewhere, as the running manager", manager.Get(ctx, client.ObjectKey{Namespace: "elsewhere", Name: "x"}, &corev1.Secret{}))
}

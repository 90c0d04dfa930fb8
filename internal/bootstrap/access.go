package bootstrap

import (
	"context"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The manager's access to the Secrets of an organisation (API clients' password hashes,
// subscriptions' signing secrets, device tokens) is a RoleBinding in the organisation's
// namespace to the ClusterRole DefaultOrganisationSecretsRole (config/rbac/
// organisation_secrets_role.yaml: get, create, update and delete of Secrets, never list or
// watch), which the manager creates itself when it sees the organisation. RBAC lets it grant
// those verbs only because its ClusterRole holds `bind` on exactly that ClusterRole; it holds
// no verb on Secrets outside its own namespace.
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=flexsite-organisation-secrets
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;create;update;delete

const (
	// DefaultOrganisationSecretsRole is the ClusterRole of the Secrets verbs the manager is
	// bound to in every organisation's namespace.
	DefaultOrganisationSecretsRole = "flexsite-organisation-secrets"
	// OrganisationSecretsBinding names the RoleBinding in an organisation's namespace.
	OrganisationSecretsBinding = "flexsite-manager-secrets"
)

// OrganisationAccess is who the manager is, and which ClusterRole its organisation
// RoleBindings name.
type OrganisationAccess struct {
	// ClusterRole holding the Secrets verbs (default DefaultOrganisationSecretsRole).
	ClusterRole string
	// ServiceAccountNamespace and ServiceAccountName: the manager's ServiceAccount.
	ServiceAccountNamespace, ServiceAccountName string
	// ControllersServiceAccountName, when set, is the controller tier's ServiceAccount (in
	// the same namespace), which the RoleBinding names too: its device connections' tokens
	// are Secrets of the organisation (docs/scale.md, "Two tiers").
	ControllersServiceAccountName string
}

func (a OrganisationAccess) clusterRole() string {
	if a.ClusterRole == "" {
		return DefaultOrganisationSecretsRole
	}
	return a.ClusterRole
}

// Grantable reports whether the manager may bind itself to the Secrets of namespace: not the
// cluster's own namespaces (kube-*), whatever their labels say.
func Grantable(namespace string) bool {
	return namespace != "" && !strings.HasPrefix(namespace, "kube-")
}

// RoleBinding is the RoleBinding that gives the manager the Secrets verbs in namespace.
func (a OrganisationAccess) RoleBinding(namespace string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: OrganisationSecretsBinding,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "flexsite"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: a.clusterRole()},
		Subjects: a.subjects(),
	}
}

// subjects are the ServiceAccounts the RoleBinding names: the manager's, and the controller
// tier's where it has one of its own.
func (a OrganisationAccess) subjects() []rbacv1.Subject {
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: a.ServiceAccountNamespace, Name: a.ServiceAccountName}}
	if a.ControllersServiceAccountName != "" && a.ControllersServiceAccountName != a.ServiceAccountName {
		subjects = append(subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: a.ServiceAccountNamespace,
			Name: a.ControllersServiceAccountName})
	}
	return subjects
}

// EnsureOrganisationAccess creates (or puts right) the manager's RoleBinding in the
// organisation's namespace. reader reads past any cache (the manager caches no RoleBinding:
// it may only get them).
func EnsureOrganisationAccess(ctx context.Context, c client.Client, reader client.Reader, namespace string, a OrganisationAccess) error {
	if !Grantable(namespace) {
		return fmt.Errorf("namespace %s cannot be an organisation", namespace)
	}
	want := a.RoleBinding(namespace)
	got := &rbacv1.RoleBinding{}
	err := reader.Get(ctx, client.ObjectKeyFromObject(want), got)
	switch {
	case apierrors.IsNotFound(err):
		err = c.Create(ctx, want, client.FieldOwner(FieldManager))
		if apierrors.IsAlreadyExists(err) {
			return nil // another replica, a moment ago
		}
		return err
	case err != nil:
		return err
	case got.RoleRef != want.RoleRef:
		// A role reference cannot change: delete it, and the next call creates it anew.
		if err := c.Delete(ctx, got, client.Preconditions{UID: &got.UID}); client.IgnoreNotFound(err) != nil {
			return err
		}
		return EnsureOrganisationAccess(ctx, c, reader, namespace, a)
	case !slices.Equal(got.Subjects, want.Subjects):
		got.Subjects = want.Subjects
		return c.Update(ctx, got, client.FieldOwner(FieldManager))
	}
	return nil
}

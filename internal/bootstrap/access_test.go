package bootstrap

import (
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

func TestGrantable(t *testing.T) {
	for ns, want := range map[string]bool{
		"acme": true, "org-x1": true, "demo": true, "flexsite-system": true,
		"": false, "kube-system": false, "kube-public": false, "kube-node-lease": false,
	} {
		if got := Grantable(ns); got != want {
			t.Errorf("Grantable(%q) = %v, want %v", ns, got, want)
		}
	}
}

func TestOrganisationRoleBinding(t *testing.T) {
	for _, tc := range []struct {
		name   string
		access OrganisationAccess
		role   string
	}{
		{"default role", OrganisationAccess{ServiceAccountNamespace: "flexsite-system", ServiceAccountName: "flexsite"}, DefaultOrganisationSecretsRole},
		{"named role", OrganisationAccess{ClusterRole: "custom", ServiceAccountNamespace: "ops", ServiceAccountName: "m"}, "custom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rb := tc.access.RoleBinding("acme")
			if rb.Namespace != "acme" || rb.Name != OrganisationSecretsBinding {
				t.Errorf("named %s/%s", rb.Namespace, rb.Name)
			}
			if rb.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: tc.role}) {
				t.Errorf("role %+v", rb.RoleRef)
			}
			want := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: tc.access.ServiceAccountNamespace, Name: tc.access.ServiceAccountName}
			if len(rb.Subjects) != 1 || rb.Subjects[0] != want {
				t.Errorf("subjects %+v, want only %+v", rb.Subjects, want)
			}
		})
	}
}

// With two tiers, an organisation's RoleBinding names the controller tier's ServiceAccount
// too (its device connections' tokens are the organisation's Secrets).
func TestOrganisationRoleBindingNamesTheControllerTier(t *testing.T) {
	rb := OrganisationAccess{ServiceAccountNamespace: "flexsite-system", ServiceAccountName: "flexsite",
		ControllersServiceAccountName: "flexsite-controllers"}.RoleBinding("acme")
	want := []rbacv1.Subject{
		{Kind: rbacv1.ServiceAccountKind, Namespace: "flexsite-system", Name: "flexsite"},
		{Kind: rbacv1.ServiceAccountKind, Namespace: "flexsite-system", Name: "flexsite-controllers"},
	}
	if !slices.Equal(rb.Subjects, want) {
		t.Fatalf("subjects %+v, want %+v", rb.Subjects, want)
	}
}

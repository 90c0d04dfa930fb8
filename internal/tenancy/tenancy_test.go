package tenancy

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func apiClient(ns, name, username string) flexv1.APIClient {
	return flexv1.APIClient{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flexv1.APIClientSpec{Username: username}}
}

func deleting(c flexv1.APIClient) flexv1.APIClient {
	now := metav1.Now()
	c.DeletionTimestamp = &now
	return c
}

func TestOwner(t *testing.T) {
	acme := apiClient("acme", "app", "acme-app")
	for _, tc := range []struct {
		name        string
		clients     []flexv1.APIClient
		wantOwner   string // namespace of the owner; "" for none
		wantHolders int
	}{
		{"no client", nil, "", 0},
		{"one client", []flexv1.APIClient{acme}, "acme", 1},
		{"two organisations share it", []flexv1.APIClient{acme, apiClient("rival", "app", "acme-app")}, "", 2},
		{"two clients of one organisation share it", []flexv1.APIClient{acme, apiClient("acme", "other", "acme-app")}, "", 2},
		{"three share it", []flexv1.APIClient{acme, apiClient("b", "x", "acme-app"), apiClient("c", "x", "acme-app")}, "", 3},
		{"another username is not a holder", []flexv1.APIClient{acme, apiClient("rival", "app", "rival-app")}, "acme", 1},
		{"case matters, as at login", []flexv1.APIClient{acme, apiClient("rival", "app", "ACME-app")}, "acme", 1},
		{"a client being deleted holds nothing", []flexv1.APIClient{acme, deleting(apiClient("rival", "app", "acme-app"))}, "acme", 1},
		{"nor logs in", []flexv1.APIClient{deleting(acme)}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner, holders := Owner(tc.clients, "acme-app")
			gotOwner := ""
			if owner != nil {
				gotOwner = owner.Namespace
			}
			if gotOwner != tc.wantOwner || holders != tc.wantHolders {
				t.Errorf("Owner() = %q, %d; want %q, %d", gotOwner, holders, tc.wantOwner, tc.wantHolders)
			}
		})
	}
}

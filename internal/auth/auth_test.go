package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/meters"
)

func TestBearerToken(t *testing.T) {
	tests := []struct {
		name    string
		headers []string
		want    string
		wantOK  bool
	}{
		{name: "bearer", headers: []string{"Bearer abc.def.ghi"}, want: "abc.def.ghi", wantOK: true},
		{name: "scheme lower case", headers: []string{"bearer abc"}, want: "abc", wantOK: true},
		{name: "scheme upper case", headers: []string{"BEARER abc"}, want: "abc", wantOK: true},
		{name: "no header"},
		{name: "empty header", headers: []string{""}},
		{name: "scheme only", headers: []string{"Bearer"}},
		{name: "empty token", headers: []string{"Bearer "}},
		{name: "two spaces", headers: []string{"Bearer  abc"}},
		{name: "tab", headers: []string{"Bearer\tabc"}},
		{name: "two tokens", headers: []string{"Bearer abc def"}},
		{name: "trailing space", headers: []string{"Bearer abc "}},
		{name: "no space", headers: []string{"Bearerabc"}},
		{name: "basic", headers: []string{"Basic dXNlcjpwYXNz"}},
		{name: "two headers", headers: []string{"Bearer abc", "Bearer def"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			for _, h := range tc.headers {
				r.Header.Add("Authorization", h)
			}
			got, ok := BearerToken(r)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("BearerToken() = %q, %v; want %q, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestPrincipalContext(t *testing.T) {
	if _, ok := PrincipalFrom(context.Background()); ok {
		t.Error("PrincipalFrom(empty context) reported a principal")
	}
	if _, ok := PrincipalFrom(WithPrincipal(context.Background(), nil)); ok {
		t.Error("PrincipalFrom(nil principal) reported a principal")
	}
	p := &Principal{Kind: KindOrganisation, Namespace: "acme"}
	got, ok := PrincipalFrom(WithPrincipal(context.Background(), p))
	if !ok || got != p {
		t.Errorf("PrincipalFrom() = %v, %v; want %v, true", got, ok, p)
	}
}

func TestHasRole(t *testing.T) {
	p := &Principal{Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleRewards}}
	for _, tc := range []struct {
		role flexv1.Role
		want bool
	}{
		{flexv1.RoleEntityRead, true},
		{flexv1.RoleRewards, true},
		{flexv1.RoleEntityWrite, false},
		{flexv1.RoleComponents, false},
	} {
		if got := p.HasRole(tc.role); got != tc.want {
			t.Errorf("HasRole(%s) = %v, want %v", tc.role, got, tc.want)
		}
	}
	if (&Principal{Kind: KindEndUser}).HasRole(flexv1.RoleEntityRead) {
		t.Error("an end user holds a role")
	}
}

// Only an organisation's API client sees MPANs in full; an end user, or no principal, is a household.
func TestMPANViewer(t *testing.T) {
	for _, c := range []struct {
		p    *Principal
		want meters.Viewer
	}{
		{&Principal{Kind: KindOrganisation, Namespace: "org-a"}, meters.OrganisationViewer},
		{&Principal{Kind: KindEndUser, Namespace: "org-a", SiteName: "s"}, meters.HouseholdViewer},
		{&Principal{Namespace: "org-a"}, meters.HouseholdViewer},
		{nil, meters.HouseholdViewer},
	} {
		if got := c.p.MPANViewer(); got != c.want {
			t.Errorf("%+v: MPANViewer = %d, want %d", c.p, got, c.want)
		}
	}
}

func TestErrors(t *testing.T) {
	if !errors.Is(ErrExpiredToken, ErrInvalidToken) {
		t.Error("ErrExpiredToken is not an ErrInvalidToken")
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{ErrInvalidCredentials, true},
		{ErrClientDisabled, true},
		{fmt.Errorf("%w: bad signature", ErrInvalidToken), true},
		{ErrExpiredToken, true},
		{errors.New("connection refused"), false},
		{nil, false},
	} {
		if got := IsAuthError(tc.err); got != tc.want {
			t.Errorf("IsAuthError(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

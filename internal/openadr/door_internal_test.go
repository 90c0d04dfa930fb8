package openadr

import (
	"net/http/httptest"
	"slices"
	"testing"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/openadr/oadrtest"
	"github.com/flexsite/flexsite/internal/web"
)

// TestRoutesAreTheDocumentsOperations: the door serves every operation of the Alliance's
// document, and nothing else under its base path.
func TestRoutesAreTheDocumentsOperations(t *testing.T) {
	c, err := oadrtest.Load("http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	routes := New(Config{Guard: &web.Authenticator{}}).Routes()
	served := make([]string, 0, len(routes))
	for _, r := range routes {
		served = append(served, r.Method+" "+r.Path)
	}
	documented := c.Operations()
	slices.Sort(served)
	slices.Sort(documented)
	if !slices.Equal(served, documented) {
		t.Fatalf("served %v\ndocumented %v", served, documented)
	}
}

// TestEveryScopeIsTheDocuments: the scopes Flexsite maps are the document's, each onto at
// least one role.
func TestEveryScopeIsTheDocuments(t *testing.T) {
	c, err := oadrtest.Load("http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	flow := c.Doc.Components.SecuritySchemes["oAuth2ClientCredentials"].Value.Flows.ClientCredentials
	documented := make([]Scope, 0, len(flow.Scopes))
	for s := range flow.Scopes {
		documented = append(documented, Scope(s))
	}
	mapped := slices.Clone(Scopes)
	slices.Sort(documented)
	slices.Sort(mapped)
	if !slices.Equal(documented, mapped) {
		t.Fatalf("document's scopes %v, mapped %v", documented, mapped)
	}
	for _, s := range Scopes {
		if len(s.Roles()) == 0 {
			t.Errorf("scope %s maps onto no role", s)
		}
	}
}

func TestNarrow(t *testing.T) {
	read, write, events := flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite
	for _, tc := range []struct {
		name        string
		held        []flexv1.Role
		asked       []Scope
		wantRoles   []flexv1.Role
		wantGranted []Scope
		wantUnknown Scope
	}{
		{"a VEN's scopes", []flexv1.Role{read, write}, []Scope{ScopeReadAll, ScopeWriteReports, ScopeWriteVens},
			[]flexv1.Role{read, write}, []Scope{ScopeReadAll, ScopeWriteReports, ScopeWriteVens}, ""},
		{"reading only narrows a writer", []flexv1.Role{read, write, events}, []Scope{ScopeReadAll},
			[]flexv1.Role{read}, []Scope{ScopeReadAll}, ""},
		{"a scope the client's roles do not grant is left out", []flexv1.Role{read}, []Scope{ScopeReadAll, ScopeWriteEvents},
			[]flexv1.Role{read}, []Scope{ScopeReadAll}, ""},
		{"subscriptions are either's", []flexv1.Role{events}, []Scope{ScopeWriteSubscriptions},
			[]flexv1.Role{events}, []Scope{ScopeWriteSubscriptions}, ""},
		{"roles keep the client's order", []flexv1.Role{write, read}, []Scope{ScopeReadAll, ScopeWriteVens},
			[]flexv1.Role{write, read}, []Scope{ScopeReadAll, ScopeWriteVens}, ""},
		{"an unknown scope", []flexv1.Role{read}, []Scope{ScopeReadAll, "admin"}, nil, nil, "admin"},
		{"nothing granted", []flexv1.Role{read}, []Scope{ScopeWriteEvents}, nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			roles, granted, unknown := narrow(tc.held, tc.asked)
			if !slices.Equal(roles, tc.wantRoles) || !slices.Equal(granted, tc.wantGranted) || unknown != tc.wantUnknown {
				t.Fatalf("narrow = %v %v %q, want %v %v %q", roles, granted, unknown, tc.wantRoles, tc.wantGranted, tc.wantUnknown)
			}
		})
	}
}

func TestParseSearch(t *testing.T) {
	for _, tc := range []struct {
		query  string
		ok     bool
		limit  int
		skip   int
		values []string
	}{
		{"", true, MaxLimit, 0, nil},
		{"?skip=3&limit=0", true, 0, 3, nil},
		{"?limit=50", true, 50, 0, nil},
		{"?limit=51", false, 0, 0, nil},
		{"?limit=-1", false, 0, 0, nil},
		{"?skip=-1", false, 0, 0, nil},
		{"?skip=x", false, 0, 0, nil},
		{"?targetType=RESOURCE_NAME&targetValues=a,b&targetValues=c", true, MaxLimit, 0, []string{"a", "b", "c"}},
		{"?targetValues=a", false, 0, 0, nil},
	} {
		s, err := parseSearch(httptest.NewRequest("GET", "/x"+tc.query, nil))
		if (err == nil) != tc.ok {
			t.Errorf("%q: err = %v", tc.query, err)
			continue
		}
		if tc.ok && (s.Limit != tc.limit || s.Skip != tc.skip || !slices.Equal(s.TargetValues, tc.values)) {
			t.Errorf("%q: %+v", tc.query, s)
		}
	}
}

package server_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/server"
)

// laggingCache is the manager's cache as the REST API and the webhooks read it, behind the API
// server for the Enrolments named in hidden: it never sees them, as a cache does for a moment
// after they are stored. The controllers read the real cache.
type laggingCache struct {
	client.Reader
	mu     sync.Mutex
	hidden map[string]bool // namespace/name
}

func (c *laggingCache) hide(e *flexv1.Enrolment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hidden[e.Namespace+"/"+e.Name] = true
}

func (c *laggingCache) isHidden(ns, name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hidden[ns+"/"+name]
}

func (c *laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*flexv1.Enrolment); ok && c.isHidden(key.Namespace, key.Name) {
		return apierrors.NewNotFound(flexv1.GroupVersion.WithResource("enrolments").GroupResource(), key.Name)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

func (c *laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	if l, ok := list.(*flexv1.EnrolmentList); ok {
		kept := l.Items[:0]
		for _, e := range l.Items {
			if !c.isHidden(e.Namespace, e.Name) {
				kept = append(kept, e)
			}
		}
		l.Items = kept
	}
	return nil
}

// An Enrolment declared by GitOps under its own name a moment before the REST API is asked to
// enrol the same site in the same proposition, with the Enrolment webhook admitting it as in
// production: the REST API's cache has not seen it yet (laggingCache, which makes the moment
// last), and the answer is already_enrolled, with one enrolment: the REST API finds it by its
// EnrolmentClaim, by GET. The other way round, an enrolment declared a moment after the REST
// enrol, which made no claim (it holds the site's place by its name), is refused while the
// webhook's cache has not seen the REST one: the webhook finds it by its name, by GET, once the
// declared one's claim is made, and withdraws that claim.
func TestGitOpsEnrolmentMomentsApart(t *testing.T) {
	lag := &laggingCache{hidden: map[string]bool{}}
	f := startFlexREST(t, func(c *server.Config) {
		lag.Reader = c.Cache
		c.Cache = lag
	})
	ctx, do := f.ctx, f.do
	ns, tok := f.org(flexv1.RoleEntityRead, flexv1.RoleEntityWrite)
	enrolmentsOf := func(siteName string) []string {
		t.Helper()
		list := &flexv1.EnrolmentList{}
		if err := f.env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range list.Items {
			if e.Spec.SiteName == siteName && e.Spec.Proposition == flexv1.PropositionLimitedPause {
				names = append(names, e.Name)
			}
		}
		return names
	}
	initialise := func(mpan string) string {
		t.Helper()
		body := household(mpan)
		delete(body, "proposition")
		status, resp := do("POST", "/entities/site/initialise", tok, body)
		if status != http.StatusOK {
			t.Fatalf("initialise %s: %d %v", mpan, status, resp)
		}
		return resp["site"].(map[string]any)["site_id"].(string)
	}

	t.Run("declared a moment before the REST enrol", func(t *testing.T) {
		for i := range 3 {
			mpan := validMPAN(i)
			siteID, siteName := initialise(mpan), identity.SiteNameForMPAN(mpan)
			declared := &flexv1.Enrolment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("declared-by-gitops-%d", i)},
				Spec:       flexv1.EnrolmentSpec{SiteName: siteName, Proposition: flexv1.PropositionLimitedPause},
			}
			lag.hide(declared)
			if err := f.env.Client.Create(ctx, declared); err != nil {
				t.Fatalf("declaring %s: %v", declared.Name, err)
			}
			status, resp := do("POST", "/entities/site/"+siteID+"/enrol", tok, map[string]any{"proposition": "limited_pause"})
			if status != http.StatusOK || resp["status"] != "already_enrolled" {
				t.Errorf("site %s: enrol answered %d %v, want already_enrolled", mpan, status, resp)
			}
			if names := enrolmentsOf(siteName); len(names) != 1 || names[0] != declared.Name {
				t.Errorf("site %s: enrolments in limited_pause %v, want only %s", mpan, names, declared.Name)
			}
		}
	})

	t.Run("declared a moment after the REST enrol", func(t *testing.T) {
		mpan := validMPAN(7)
		siteID, siteName := initialise(mpan), identity.SiteNameForMPAN(mpan)
		named := identity.EnrolmentName(siteName, flexv1.PropositionLimitedPause)
		lag.hide(&flexv1.Enrolment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: named}})
		status, resp := do("POST", "/entities/site/"+siteID+"/enrol", tok, map[string]any{"proposition": "limited_pause"})
		if status != http.StatusOK || resp["status"] != "enrolled" {
			t.Fatalf("enrol answered %d %v", status, resp)
		}
		claimKey := client.ObjectKey{Namespace: ns, Name: identity.EnrolmentClaimName(siteName, flexv1.PropositionLimitedPause)}
		if err := f.env.Client.Get(ctx, claimKey, &flexv1.EnrolmentClaim{}); !apierrors.IsNotFound(err) {
			t.Errorf("the REST enrol's claim: %v, want none", err)
		}
		declared := &flexv1.Enrolment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "declared-by-gitops-late"},
			Spec:       flexv1.EnrolmentSpec{SiteName: siteName, Proposition: flexv1.PropositionLimitedPause},
		}
		err := f.env.Client.Create(ctx, declared)
		want := fmt.Sprintf("already enrolled in it by Enrolment %q", named)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("declaring a second enrolment: %v, want Invalid %q", err, want)
		}
		if names := enrolmentsOf(siteName); len(names) != 1 || names[0] != named {
			t.Errorf("enrolments in limited_pause %v, want only %s", names, named)
		}
		if err := f.env.Client.Get(ctx, claimKey, &flexv1.EnrolmentClaim{}); !apierrors.IsNotFound(err) {
			t.Errorf("the refused enrolment's claim: %v, want withdrawn", err)
		}
	})
}

package index_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/testenv"
)

// env is the API server the tests share; nil when KUBEBUILDER_ASSETS is unset (the tests that
// need it skip).
var env *testenv.Env

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard())
	os.Exit(testenv.RunShared(m, &env))
}

// wrapped is a reader that wraps the cache and knows nothing of indexes, as the suites'
// fault-injecting readers do: its lookups must work all the same (before, such a wrapper
// had to implement index.Finder and index.ListFor, and one that listed into the wrong kind
// answered 500 in CI).
type wrapped struct{ client.Reader }

// Every Lookup finds the same objects by every key: the cache's (its informers' stores), a
// reader that wraps the cache (through its List of the bucket), and the API server's (its
// selectors).
func TestLookupsAgree(t *testing.T) {
	if env == nil {
		t.Skip("KUBEBUILDER_ASSETS is not set: run `make test`")
	}
	ctx := t.Context()
	opts := index.CacheOptions()
	opts.Scheme = testenv.Scheme
	c, err := cache.New(env.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Register(ctx, c); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	ns, err := env.Namespace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Two sites and their children; the second site's keys share nothing with the first's.
	// The objects are written straight to the API server (no webhook runs here): only the
	// fields the indexes read matter.
	for i := range 2 {
		site := fmt.Sprintf("site-%d", i)
		objs := []client.Object{
			&flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: site, Labels: map[string]string{flexv1.IDLabel: fmt.Sprintf("site-id-%d", i)}},
				Spec: flexv1.SiteSpec{MPAN: fmt.Sprintf("120000000001%d", i), ExternalUserID: fmt.Sprintf("user-%d", i)}},
			&flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: site + "-charger", Labels: map[string]string{flexv1.IDLabel: fmt.Sprintf("asset-id-%d", i)}},
				Spec: flexv1.AssetSpec{SiteName: site, Type: flexv1.AssetTypeCharger, ExternalID: fmt.Sprintf("ext-%d", i),
					Model: fmt.Sprintf("%s-model-%d", ns, i)}},
			&flexv1.APIClient{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("client-%d", i)},
				Spec: flexv1.APIClientSpec{Username: fmt.Sprintf("%s-user-%d", ns, i), PasswordHashSecretRef: flexv1.SecretKeyRef{Name: "credentials"}}},
			&flexv1.Enrolment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: site + "-enrolment"},
				Spec: flexv1.EnrolmentSpec{SiteName: site, Proposition: "limited_pause"}},
			&flexv1.MPANClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("claim-%d", i)},
				Spec: flexv1.MPANClaimSpec{SiteName: site, MPAN: fmt.Sprintf("120000000001%d", i)}},
			&flexv1.DeviceConnection{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: site + "-connection",
				Annotations: map[string]string{flexv1.OAuthStateAnnotation: fmt.Sprintf("%s-state-%d", ns, i)}},
				Spec: flexv1.DeviceConnectionSpec{SiteName: site, Provider: "myenergi"}},
		}
		for _, o := range objs {
			if err := env.Client.Create(ctx, o); err != nil {
				t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
			}
		}
	}
	names := func(objs []client.Object) []string {
		out := make([]string, 0, len(objs))
		for _, o := range objs {
			out = append(out, o.GetNamespace()+"/"+o.GetName())
		}
		slices.Sort(out)
		return out
	}
	// A question asks one Lookup one thing; as gives its answer as client.Objects.
	type question struct {
		name string
		ask  func(l index.Lookup) ([]client.Object, error)
		want []string
	}
	as := func(objs any, err error) ([]client.Object, error) {
		if err != nil {
			return nil, err
		}
		var out []client.Object
		switch v := objs.(type) {
		case []*flexv1.Site:
			for _, o := range v {
				out = append(out, o)
			}
		case []*flexv1.Asset:
			for _, o := range v {
				out = append(out, o)
			}
		case []*flexv1.Enrolment:
			for _, o := range v {
				out = append(out, o)
			}
		case []*flexv1.MPANClaim:
			for _, o := range v {
				out = append(out, o)
			}
		case []*flexv1.DeviceConnection:
			for _, o := range v {
				out = append(out, o)
			}
		case []*flexv1.APIClient:
			for _, o := range v {
				out = append(out, o)
			}
		}
		return out, nil
	}
	in := func(name string) []string { return []string{ns + "/" + name} }
	questions := []question{
		{"site by id", func(l index.Lookup) ([]client.Object, error) { return as(l.SitesByID(ctx, ns, "site-id-1")) }, in("site-1")},
		{"site by id across namespaces", func(l index.Lookup) ([]client.Object, error) { return as(l.SitesByID(ctx, "", "site-id-0")) },
			// other tests' namespaces hold no site with this id
			in("site-0")},
		{"site by MPAN", func(l index.Lookup) ([]client.Object, error) { return as(l.SitesByMPAN(ctx, ns, "1200000000010")) }, in("site-0")},
		{"site by end user", func(l index.Lookup) ([]client.Object, error) { return as(l.SitesByExternalUserID(ctx, ns, "user-1")) }, in("site-1")},
		{"asset by id", func(l index.Lookup) ([]client.Object, error) { return as(l.AssetsByID(ctx, ns, "asset-id-0")) }, in("site-0-charger")},
		{"asset by external id", func(l index.Lookup) ([]client.Object, error) { return as(l.AssetsByExternalID(ctx, ns, "ext-1")) }, in("site-1-charger")},
		{"assets of a site", func(l index.Lookup) ([]client.Object, error) { return as(l.AssetsOfSite(ctx, ns, "site-1")) }, in("site-1-charger")},
		{"enrolments of a site", func(l index.Lookup) ([]client.Object, error) { return as(l.EnrolmentsOfSite(ctx, ns, "site-0")) }, in("site-0-enrolment")},
		{"claims of a site", func(l index.Lookup) ([]client.Object, error) { return as(l.MPANClaimsOfSite(ctx, ns, "site-1")) }, in("claim-1")},
		{"connections of a site", func(l index.Lookup) ([]client.Object, error) {
			return as(l.DeviceConnectionsOfSite(ctx, ns, "site-0"))
		}, in("site-0-connection")},
		{"connection by state", func(l index.Lookup) ([]client.Object, error) {
			return as(l.DeviceConnectionsByOAuthState(ctx, ns+"-state-1"))
		}, in("site-1-connection")},
		{"assets of a model", func(l index.Lookup) ([]client.Object, error) { return as(l.AssetsOfModel(ctx, ns+"-model-1")) },
			in("site-1-charger")},
		{"API client by username", func(l index.Lookup) ([]client.Object, error) {
			return as(l.APIClientsByUsername(ctx, ns+"-user-0"))
		}, in("client-0")},
		{"nobody's id", func(l index.Lookup) ([]client.Object, error) { return as(l.SitesByID(ctx, ns, "none")) }, nil},
		{"an empty key", func(l index.Lookup) ([]client.Object, error) { return as(l.AssetsByExternalID(ctx, ns, "")) }, nil},
	}
	lookups := map[string]index.Lookup{
		"cache":               index.NewLookup(c),
		"wrapped cache":       index.NewLookup(wrapped{c}),
		"client of the cache": index.NewLookup(index.CachedClient{Client: env.Client, Cache: c}),
		"API server":          index.NewAPIServerLookup(env.Client),
	}
	for lname, l := range lookups {
		for _, q := range questions {
			t.Run(lname+"/"+q.name, func(t *testing.T) {
				// The cache sees the writes a moment later: wait for the answer, with a deadline.
				var got []string
				var lastErr error
				err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
					objs, err := q.ask(l)
					if err != nil {
						lastErr = err
						return false, err // no lookup fails for being early
					}
					got = names(objs)
					return slices.Equal(got, q.want), nil
				})
				if err != nil {
					t.Fatalf("found %v (error %v), want %v", got, lastErr, q.want)
				}
			})
		}
	}
}

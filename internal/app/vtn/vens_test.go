package vtn_test

import (
	"context"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/app/apptest"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/vtn"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/testenv"
	"github.com/flexsite/flexsite/internal/vtnstore"
)

// One API server, one indexed cache and one database for the package's tests, and the use
// cases built on them as cmd/manager builds them (no HTTP).
var (
	env      *testenv.Env
	database *dbtest.Database
	svc      *vtn.Service
)

func TestMain(m *testing.M) {
	apptest.MainWithDatabase(m, func(_ context.Context, e *testenv.Env, households *app.Service, d *dbtest.Database) error {
		env, database = e, d
		svc = vtn.New(households, &vtnstore.Store{Pool: d.Pool})
		return nil
	})
}

// client is an API client of organisation ns: a VEN client, or the business logic (which
// declares flex events and sees every VEN).
func client(ns, name string, businessLogic bool) *auth.Principal {
	roles := []flexv1.Role{flexv1.RoleEntityRead}
	if businessLogic {
		roles = append(roles, flexv1.RoleFlexEventsWrite)
	}
	return &auth.Principal{Kind: auth.KindOrganisation, Namespace: ns, ClientName: name, Username: name + "-" + ns, Roles: roles}
}

// asset creates a site of organisation ns with one charger (API id id), and waits for the
// cache to have it.
func asset(t *testing.T, g *WithT, ns, id string) {
	t.Helper()
	ctx := t.Context()
	site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "site-" + id,
		Labels: map[string]string{flexv1.IDLabel: "site-" + id}}, Spec: flexv1.SiteSpec{Postcode: "SW1A 1AA"}}
	g.Expect(env.Client.Create(ctx, site)).To(Succeed())
	a := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: id, Labels: map[string]string{flexv1.IDLabel: id}},
		Spec: flexv1.AssetSpec{SiteName: site.Name, ExternalID: "ext-" + id, Type: flexv1.AssetTypeCharger, PowerW: ptr.To[int64](7400)}}
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
	p := client(ns, "reader", true)
	g.Eventually(func(g Gomega) {
		_, err := svc.Households.FindAsset(ctx, p, id, false)
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

func kindOf(err error) app.Kind {
	if e := app.As(err); e != nil {
		return e.Kind
	}
	return app.Internal
}

// A VEN is its client's: another VEN client of the organisation neither sees nor changes it,
// the business logic sees every one; a name is the organisation's once.
func TestVENsAreTheirClients(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := testenv.SharedNamespace(t, env)
	a, b, logic := client(ns, "ven-a", false), client(ns, "ven-b", false), client(ns, "logic", true)

	v, err := svc.CreateVEN(ctx, a, vtn.VENInput{Name: "house-1", Targets: []vtn.Values{{Type: "GROUP", Values: []any{"g1"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.ClientName).To(Equal("ven-a"))
	got, err := svc.VEN(ctx, a, v.ID.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Name).To(Equal("house-1"))
	g.Expect(got.Targets).To(HaveLen(1))

	_, err = svc.CreateVEN(ctx, b, vtn.VENInput{Name: "house-1"})
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)

	_, err = svc.VEN(ctx, b, v.ID.String())
	g.Expect(err).To(MatchError(vtn.ErrVENNotFound))
	_, err = svc.UpdateVEN(ctx, b, v.ID.String(), vtn.VENInput{Name: "mine now"})
	g.Expect(err).To(MatchError(vtn.ErrVENNotFound))
	_, err = svc.DeleteVEN(ctx, b, v.ID.String())
	g.Expect(err).To(MatchError(vtn.ErrVENNotFound))
	theirs, err := svc.VENs(ctx, b, vtn.Search{Limit: 50})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(theirs).To(BeEmpty())

	all, err := svc.VENs(ctx, logic, vtn.Search{Limit: 50})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all).To(ConsistOf(HaveField("ID", v.ID)))
	byName, err := svc.VENs(ctx, a, vtn.Search{Name: "house-1", Limit: 50})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byName).To(HaveLen(1))

	updated, err := svc.UpdateVEN(ctx, a, v.ID.String(), vtn.VENInput{Name: "house-1b"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(updated.Name).To(Equal("house-1b"))
	g.Expect(updated.Modified).NotTo(BeTemporally("<", v.Modified))
	deleted, err := svc.DeleteVEN(ctx, a, v.ID.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deleted.ID).To(Equal(v.ID))
	_, err = svc.VEN(ctx, a, v.ID.String())
	g.Expect(err).To(MatchError(vtn.ErrVENNotFound))
	_, err = svc.VEN(ctx, a, "not-a-uuid")
	g.Expect(err).To(MatchError(vtn.ErrVENNotFound))
}

// A resource is one of the organisation's assets, held by one VEN at a time.
func TestResources(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns := testenv.SharedNamespace(t, env)
	asset(t, g, ns, "charger-1")
	a, b := client(ns, "ven-a", false), client(ns, "ven-b", false)
	va, err := svc.CreateVEN(ctx, a, vtn.VENInput{Name: "a"})
	g.Expect(err).NotTo(HaveOccurred())
	vb, err := svc.CreateVEN(ctx, b, vtn.VENInput{Name: "b"})
	g.Expect(err).NotTo(HaveOccurred())

	r, err := svc.CreateResource(ctx, a, va.ID.String(), vtn.ResourceInput{Name: "charger-1"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Asset).To(Equal(&vtn.AssetFacts{Type: flexv1.AssetTypeCharger, PowerW: ptr.To[int64](7400)}))
	got, err := svc.Resource(ctx, a, va.ID.String(), r.ID.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Name).To(Equal("charger-1"))
	list, err := svc.Resources(ctx, a, va.ID.String(), vtn.Search{Limit: 50})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(ConsistOf(HaveField("Resource.ID", r.ID)))

	_, err = svc.CreateResource(ctx, b, vb.ID.String(), vtn.ResourceInput{Name: "charger-1"})
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)
	_, err = svc.CreateResource(ctx, a, va.ID.String(), vtn.ResourceInput{Name: "no-such-asset"})
	g.Expect(kindOf(err)).To(Equal(app.Invalid))
	g.Expect(app.As(err).Detail).To(ConsistOf(HaveField("Loc", []any{"body", "resourceName"})))
	_, err = svc.Resource(ctx, b, va.ID.String(), r.ID.String())
	g.Expect(err).To(MatchError(vtn.ErrVENNotFound))
	_, err = svc.Resource(ctx, a, va.ID.String(), "not-a-uuid")
	g.Expect(err).To(MatchError(vtn.ErrResourceNotFound))

	deleted, err := svc.DeleteResource(ctx, a, va.ID.String(), r.ID.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deleted.ID).To(Equal(r.ID))
	// Released: another VEN may hold it now.
	_, err = svc.CreateResource(ctx, b, vb.ID.String(), vtn.ResourceInput{Name: "charger-1"})
	g.Expect(err).NotTo(HaveOccurred())
}

// Another organisation's VENs and assets are not found; a household's token is refused.
func TestAnotherOrganisation(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	mine, theirs := testenv.SharedNamespace(t, env), testenv.SharedNamespace(t, env)
	asset(t, g, theirs, "charger-theirs")
	v, err := svc.CreateVEN(ctx, client(theirs, "ven", false), vtn.VENInput{Name: "theirs"})
	g.Expect(err).NotTo(HaveOccurred())

	logic := client(mine, "logic", true)
	_, err = svc.VEN(ctx, logic, v.ID.String())
	g.Expect(err).To(MatchError(vtn.ErrVENNotFound))
	all, err := svc.VENs(ctx, logic, vtn.Search{Limit: 50})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all).To(BeEmpty())
	mineVEN, err := svc.CreateVEN(ctx, client(mine, "ven", false), vtn.VENInput{Name: "theirs"}) // names are per organisation
	g.Expect(err).NotTo(HaveOccurred())
	_, err = svc.CreateResource(ctx, client(mine, "ven", false), mineVEN.ID.String(), vtn.ResourceInput{Name: "charger-theirs"})
	g.Expect(kindOf(err)).To(Equal(app.Invalid))

	household := &auth.Principal{Kind: auth.KindEndUser, Namespace: theirs, SiteName: "site-charger-theirs", UserID: "u"}
	_, err = svc.VENs(ctx, household, vtn.Search{Limit: 50})
	g.Expect(kindOf(err)).To(Equal(app.Forbidden))
	_, err = svc.CreateVEN(ctx, household, vtn.VENInput{Name: "x"})
	g.Expect(kindOf(err)).To(Equal(app.Forbidden))
}

// With the database down the VTN's records are refused as unavailable, nothing changed, with
// advice on when to retry; with it back they answer.
func TestDatabaseDownIsUnavailable(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	if database == nil || !database.CanStop() {
		t.Skip("no test database whose server this process runs (KUBEBUILDER_ASSETS, PostgreSQL, or $FLEXSITE_TEST_DATABASE_URL)")
	}
	ns := testenv.SharedNamespace(t, env)
	a := client(ns, "ven-a", false)
	v, err := svc.CreateVEN(ctx, a, vtn.VENInput{Name: "down"})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(database.Stop()).To(Succeed())
	up := false
	t.Cleanup(func() {
		if !up {
			_ = database.Start(context.Background())
		}
	})
	_, err = svc.CreateVEN(ctx, a, vtn.VENInput{Name: "while-down"})
	g.Expect(err).To(MatchError(vtn.ErrUnavailable))
	g.Expect(app.As(err).RetryAfter).NotTo(BeEmpty())
	_, err = svc.VEN(ctx, a, v.ID.String())
	g.Expect(err).To(MatchError(vtn.ErrUnavailable))
	_, err = svc.VENs(ctx, a, vtn.Search{Limit: 50})
	g.Expect(err).To(MatchError(vtn.ErrUnavailable))
	_, err = svc.Sees(ctx, a)
	g.Expect(err).To(MatchError(vtn.ErrUnavailable))

	g.Expect(database.Start(ctx)).To(Succeed())
	up = true
	list, err := svc.VENs(ctx, a, vtn.Search{Limit: 50})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(ConsistOf(HaveField("Name", "down"))) // nothing was written meanwhile
}

package subscriptions_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/app/apptest"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/subscriptions"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/outboxstore"
	"github.com/flexsite/flexsite/internal/testenv"
)

// One API server, one indexed cache and one database for the package's tests, and the use
// cases built on them as cmd/manager builds them (no HTTP).
var (
	env      *testenv.Env
	database *dbtest.Database
	svc      *subscriptions.Service
)

func TestMain(m *testing.M) {
	apptest.MainWithDatabase(m, func(_ context.Context, e *testenv.Env, households *app.Service, d *dbtest.Database) error {
		env, database = e, d
		svc = subscriptions.New(households, &outboxstore.Store{Pool: d.Pool})
		return nil
	})
}

func org(t *testing.T, client string) *auth.Principal { return apptest.Organisation(t, env, client) }

// listed waits until p's list holds n subscriptions (the cache follows the API server).
func listed(t *testing.T, g *WithT, p *auth.Principal, n int) subscriptions.SubscriptionList {
	t.Helper()
	var out subscriptions.SubscriptionList
	g.Eventually(func(g Gomega) {
		var err error
		out, err = svc.List(t.Context(), p)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.Subscriptions).To(HaveLen(n))
	}).WithTimeout(10 * time.Second).Should(Succeed())
	return out
}

func kindOf(err error) app.Kind {
	if e := app.As(err); e != nil {
		return e.Kind
	}
	return app.Internal
}

// A subscription is created with its signing secret (answered once, kept in a Secret it owns),
// read and listed without it, pinged (the ping in its deliveries' outbox), and deleted with
// its Secret.
func TestCreateReadPingDelete(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t, "client")
	created, err := svc.Create(ctx, p, "https://hooks.example/flex", []flexv1.EventType{flexv1.EventAssetChanged})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created.Secret).To(HavePrefix("whsec_"))
	g.Expect(created.Events).To(Equal([]flexv1.EventType{flexv1.EventAssetChanged}))
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace,
		Name: subscriptions.SubscriptionSecretName(created.ID)}, sec)).To(Succeed())
	g.Expect(string(sec.Data["secret"])).To(Equal(created.Secret))

	list := listed(t, g, p, 1)
	want := subscriptions.SubscriptionRecord{ID: created.ID, URL: "https://hooks.example/flex",
		Events: []flexv1.EventType{flexv1.EventAssetChanged}}
	g.Expect(list.Subscriptions).To(Equal([]subscriptions.SubscriptionRecord{want}))
	got, err := svc.Get(ctx, p, created.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))

	// None: every type, answered as an empty list, never null.
	every, err := svc.Create(ctx, p, "https://hooks.example/all", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(every.Events).To(BeEmpty())
	g.Expect(every.Events).NotTo(BeNil())

	ping, err := svc.Test(ctx, p, created.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ping.EventID).NotTo(BeEmpty())
	deliveries, err := svc.Deliveries(ctx, p, created.ID, 10)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deliveries.Deliveries).NotTo(BeNil())

	g.Expect(svc.Delete(ctx, p, created.ID)).To(Succeed())
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace,
		Name: subscriptions.SubscriptionSecretName(created.ID)}, &corev1.Secret{})).NotTo(Succeed())
	g.Expect(svc.Delete(ctx, p, created.ID)).To(MatchError(subscriptions.ErrSubscriptionNotFound))
	listed(t, g, p, 1)
}

// Another organisation's subscription is not found, whatever is asked of it; a name that no
// object could have is not found without a read.
func TestAnotherOrganisationsAreNotFound(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	mine, theirs := org(t, "client"), org(t, "client")
	created, err := svc.Create(ctx, theirs, "https://hooks.example/theirs", nil)
	g.Expect(err).NotTo(HaveOccurred())
	listed(t, g, theirs, 1)

	_, err = svc.Get(ctx, mine, created.ID)
	g.Expect(err).To(MatchError(subscriptions.ErrSubscriptionNotFound))
	_, err = svc.Test(ctx, mine, created.ID)
	g.Expect(err).To(MatchError(subscriptions.ErrSubscriptionNotFound))
	_, err = svc.Deliveries(ctx, mine, created.ID, 10)
	g.Expect(err).To(MatchError(subscriptions.ErrSubscriptionNotFound))
	g.Expect(svc.Delete(ctx, mine, created.ID)).To(MatchError(subscriptions.ErrSubscriptionNotFound))
	list, err := svc.List(ctx, mine)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Subscriptions).To(BeEmpty())
	for _, id := range []string{"", "UPPER", "../x", strings.Repeat("a", 254)} {
		_, err = svc.Get(ctx, theirs, id)
		g.Expect(err).To(MatchError(subscriptions.ErrSubscriptionNotFound), "%q", id)
	}
	// Theirs is still there.
	_, err = svc.Get(ctx, theirs, created.ID)
	g.Expect(err).NotTo(HaveOccurred())
}

// An organisation holds at most MaxSubscriptions: one more is refused as a conflict.
func TestCap(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t, "client")
	capped := *svc
	capped.MaxSubscriptions = 2
	for range 2 {
		_, err := capped.Create(ctx, p, "https://hooks.example/x", nil)
		g.Expect(err).NotTo(HaveOccurred())
	}
	listed(t, g, p, 2)
	_, err := capped.Create(ctx, p, "https://hooks.example/x", nil)
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)
	_, err = capped.CreateOpenADR(ctx, p, subscriptions.OpenADRInput{ClientName: "ven", ProgramID: "p",
		Objects: []flexv1.OpenADRObject{flexv1.OpenADRObjectEvent}, Operations: []flexv1.OpenADROperation{flexv1.OpenADROperationCreate},
		CallbackURL: "https://ven.example/cb"})
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)
}

// An OpenADR subscription is its maker's: another VEN client of the organisation does not see
// it; the business logic (all) sees every one.
func TestOpenADROwnership(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ven := org(t, "ven-a")
	other := &auth.Principal{Kind: auth.KindOrganisation, Namespace: ven.Namespace, ClientName: "ven-b"}
	in := subscriptions.OpenADRInput{ClientName: "VEN A", ProgramID: "prog",
		Objects:     []flexv1.OpenADRObject{flexv1.OpenADRObjectEvent, flexv1.OpenADRObjectEvent},
		Operations:  []flexv1.OpenADROperation{flexv1.OpenADROperationDelete, flexv1.OpenADROperationCreate},
		CallbackURL: "https://ven.example/cb", BearerToken: "tok"}
	rec, err := svc.CreateOpenADR(ctx, ven, in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.Objects).To(Equal([]flexv1.OpenADRObject{flexv1.OpenADRObjectEvent}))
	g.Expect(rec.Operations).To(Equal([]flexv1.OpenADROperation{flexv1.OpenADROperationCreate, flexv1.OpenADROperationDelete}))

	g.Eventually(func(g Gomega) {
		mine, err := svc.ListOpenADR(ctx, ven, false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mine).To(ConsistOf(HaveField("ID", rec.ID)))
	}).WithTimeout(10 * time.Second).Should(Succeed())
	theirs, err := svc.ListOpenADR(ctx, other, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(theirs).To(BeEmpty())
	all, err := svc.ListOpenADR(ctx, other, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all).To(HaveLen(1))

	_, err = svc.GetOpenADR(ctx, other, false, rec.ID)
	g.Expect(err).To(MatchError(subscriptions.ErrSubscriptionNotFound))
	_, err = svc.UpdateOpenADR(ctx, other, false, rec.ID, in)
	g.Expect(err).To(MatchError(subscriptions.ErrSubscriptionNotFound))
	_, err = svc.DeleteOpenADR(ctx, other, false, rec.ID)
	g.Expect(err).To(MatchError(subscriptions.ErrSubscriptionNotFound))

	// The business logic may change it; its maker stays its owner, and the token goes when not given.
	in.ProgramID, in.BearerToken = "prog-2", ""
	updated, err := svc.UpdateOpenADR(ctx, other, true, rec.ID, in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(updated.ProgramID).To(Equal("prog-2"))
	sub := &flexv1.Subscription{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ven.Namespace, Name: rec.ID}, sub)).To(Succeed())
	g.Expect(sub.Spec.OpenADR.APIClient).To(Equal("ven-a"))
	sec := &corev1.Secret{}
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ven.Namespace, Name: sub.Spec.SecretRef.Name}, sec)).To(Succeed())
	g.Expect(sec.Data).NotTo(HaveKey(subscriptions.BearerTokenKey))

	deleted, err := svc.DeleteOpenADR(ctx, ven, false, rec.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deleted.ID).To(Equal(rec.ID))
}

// With the database down, a ping and the delivery log are refused as unavailable, with advice
// on when to retry (not an internal failure); with it back they answer.
func TestDatabaseDownIsUnavailable(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	if database == nil || !database.CanStop() {
		t.Skip("no test database whose server this process runs (KUBEBUILDER_ASSETS, PostgreSQL, or $FLEXSITE_TEST_DATABASE_URL)")
	}
	p := org(t, "client")
	created, err := svc.Create(ctx, p, "https://hooks.example/down", nil)
	g.Expect(err).NotTo(HaveOccurred())
	listed(t, g, p, 1)

	g.Expect(database.Stop()).To(Succeed())
	up := false
	t.Cleanup(func() {
		if !up {
			_ = database.Start(context.Background())
		}
	})
	_, err = svc.Test(ctx, p, created.ID)
	g.Expect(err).To(MatchError(subscriptions.ErrOutboxUnavailable))
	_, err = svc.Deliveries(ctx, p, created.ID, 10)
	g.Expect(err).To(MatchError(subscriptions.ErrOutboxUnavailable))
	g.Expect(app.As(err).RetryAfter).NotTo(BeEmpty())

	g.Expect(database.Start(ctx)).To(Succeed())
	up = true
	_, err = svc.Test(ctx, p, created.ID)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = svc.Deliveries(ctx, p, created.ID, 10)
	g.Expect(err).NotTo(HaveOccurred())
}

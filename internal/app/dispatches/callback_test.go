package dispatches_test

import (
	"context"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/app/apptest"

	"github.com/google/uuid"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/dispatches"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/testenv"
)

// One API server, one indexed cache and one database for the package's tests, and the use
// case built on them as cmd/manager builds it (no HTTP).
var (
	env      *testenv.Env
	database *dbtest.Database
	svc      *dispatches.Service
)

func TestMain(m *testing.M) {
	apptest.MainWithDatabase(m, func(_ context.Context, e *testenv.Env, households *app.Service, d *dbtest.Database) error {
		env, database = e, d
		svc = dispatches.New(households, &dispatchstore.Store{Pool: d.Pool})
		return nil
	})
}

func org(t *testing.T) *auth.Principal { return apptest.Organisation(t, env, "client") }

// dispatched creates a site of p's with one asset (API id assetID, external id "ext-"+assetID),
// waits for the cache to have it, and issues it a dispatch over a window that started an
// hour ago: its event id.
func dispatched(t *testing.T, g *WithT, p *auth.Principal, assetID string) uuid.UUID {
	t.Helper()
	ctx := t.Context()
	site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "site-" + assetID,
		Labels: map[string]string{flexv1.IDLabel: "site-" + assetID}}, Spec: flexv1.SiteSpec{Postcode: "SW1A 1AA"}}
	g.Expect(env.Client.Create(ctx, site)).To(Succeed())
	asset := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: assetID,
		Labels: map[string]string{flexv1.IDLabel: assetID}},
		Spec: flexv1.AssetSpec{SiteName: site.Name, ExternalID: "ext-" + assetID, Type: flexv1.AssetTypeCharger, PowerW: ptr.To[int64](7400)}}
	g.Expect(env.Client.Create(ctx, asset)).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := svc.Households.FindAsset(ctx, p, assetID, false)
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(10 * time.Second).Should(Succeed())
	now := time.Now()
	from := now.Add(-time.Hour).Truncate(30 * time.Minute)
	flexEvent := uuid.NewString()
	n, err := svc.Store.Issue(ctx, p.Namespace, "https://flexsite.test", []dispatchstore.Dispatch{{FlexEvent: flexEvent,
		SiteID: site.Labels[flexv1.IDLabel], AssetID: assetID, MarketID: "limited_pause", Proposition: "limited_pause",
		LevelKW: 7.4, From: from, To: from.Add(2 * time.Hour), EventTimestamp: now}}, nil, now)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	var id uuid.UUID
	g.Expect(database.Pool.QueryRow(ctx, `SELECT event_id FROM dispatches WHERE organisation = $1 AND asset_id = $2`,
		p.Namespace, assetID).Scan(&id)).To(Succeed())
	return id
}

func report(p *auth.Principal, asset string, external bool, event uuid.UUID, st dispatch.Status) (dispatches.CallbackResult, error) {
	return svc.Callback(context.Background(), p, dispatches.CallbackInput{Asset: asset, External: external,
		EventID: event.String(), Status: st, At: time.Now()})
}

func kindOf(err error) app.Kind {
	if e := app.As(err); e != nil {
		return e.Kind
	}
	return app.Internal
}

// A dispatch's reports move it forward, by the asset's API id or its external id: the same
// status again changes nothing, and nothing follows a final one.
func TestCallbackSteps(t *testing.T) {
	g := NewWithT(t)
	p := org(t)
	event := dispatched(t, g, p, "a-steps")

	got, err := report(p, "a-steps", false, event, dispatch.Received)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(dispatches.CallbackResult{EventID: event.String(), AssetID: "a-steps", Status: "RECEIVED", Changed: true}))
	got, err = report(p, "ext-a-steps", true, event, dispatch.Received)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Changed).To(BeFalse())
	got, err = report(p, "ext-a-steps", true, event, dispatch.Accepted)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(HaveField("Status", "ACCEPTED"))

	_, err = report(p, "a-steps", false, event, dispatch.Received)
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err) // back
	_, err = report(p, "a-steps", false, event, dispatch.Executed)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = report(p, "a-steps", false, event, dispatch.Failed)
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err) // after a final one
}

func TestCallbackRefusals(t *testing.T) {
	g := NewWithT(t)
	p := org(t)
	event := dispatched(t, g, p, "a-refused")

	_, err := report(p, "a-refused", false, event, dispatch.Requested)
	g.Expect(kindOf(err)).To(Equal(app.Invalid))
	g.Expect(app.As(err).Detail).To(ConsistOf(HaveField("Loc", []any{"body", "status"})))
	_, err = report(p, "a-refused", false, uuid.New(), dispatch.Received)
	g.Expect(err).To(MatchError(dispatches.ErrDispatchNotFound))
	_, err = svc.Callback(t.Context(), p, dispatches.CallbackInput{Asset: "a-refused", EventID: "not-a-uuid", Status: dispatch.Received})
	g.Expect(err).To(MatchError(dispatches.ErrDispatchNotFound))
	_, err = report(p, "no-such-asset", false, event, dispatch.Received)
	g.Expect(err).To(MatchError(app.ErrAssetNotFound))
	household := &auth.Principal{Kind: auth.KindEndUser, Namespace: p.Namespace, SiteName: "site-a-refused", UserID: "u"}
	_, err = report(household, "a-refused", false, event, dispatch.Received)
	g.Expect(kindOf(err)).To(Equal(app.Forbidden))
}

// Another organisation's asset and dispatch are not found, and its report changes nothing.
func TestCallbackAnotherOrganisation(t *testing.T) {
	g := NewWithT(t)
	mine, theirs := org(t), org(t)
	event := dispatched(t, g, theirs, "a-theirs")
	mineToo := dispatched(t, g, mine, "a-mine")

	_, err := report(mine, "a-theirs", false, event, dispatch.Received)
	g.Expect(err).To(MatchError(app.ErrAssetNotFound))
	_, err = report(mine, "ext-a-theirs", true, event, dispatch.Received)
	g.Expect(err).To(MatchError(app.ErrAssetNotFound))
	// My asset with their event id: not mine.
	_, err = report(mine, "a-mine", false, event, dispatch.Received)
	g.Expect(err).To(MatchError(dispatches.ErrDispatchNotFound))
	got, err := report(theirs, "a-theirs", false, event, dispatch.Received)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Changed).To(BeTrue())
	got, err = report(mine, "a-mine", false, mineToo, dispatch.Received)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Changed).To(BeTrue())
}

// With the database down a report is refused as unavailable (nothing recorded), with advice on
// when to retry; with it back, the same report is taken.
func TestCallbackDatabaseDown(t *testing.T) {
	g := NewWithT(t)
	if database == nil || !database.CanStop() {
		t.Skip("no test database whose server this process runs (KUBEBUILDER_ASSETS, PostgreSQL, or $FLEXSITE_TEST_DATABASE_URL)")
	}
	p := org(t)
	event := dispatched(t, g, p, "a-down")
	g.Expect(database.Stop()).To(Succeed())
	up := false
	t.Cleanup(func() {
		if !up {
			_ = database.Start(context.Background())
		}
	})
	_, err := report(p, "a-down", false, event, dispatch.Received)
	g.Expect(err).To(MatchError(dispatches.ErrUnavailable))
	g.Expect(app.As(err).RetryAfter).NotTo(BeEmpty())
	g.Expect(database.Start(t.Context())).To(Succeed())
	up = true
	got, err := report(p, "a-down", false, event, dispatch.Received)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Changed).To(BeTrue())
}

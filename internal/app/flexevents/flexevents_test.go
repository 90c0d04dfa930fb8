package flexevents_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/app/apptest"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/flexevents"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/settlementstore"
	"github.com/flexsite/flexsite/internal/testenv"
)

// One API server, one manager's cache and one database for the package's tests, and the use
// cases built on them as cmd/manager builds them (no HTTP).
var (
	env      *testenv.Env
	database *dbtest.Database
	svc      *flexevents.Service
)

func TestMain(m *testing.M) {
	apptest.MainWithDatabase(m, func(_ context.Context, e *testenv.Env, households *app.Service, d *dbtest.Database) error {
		env, database = e, d
		svc = flexevents.New(households, &settlementstore.Store{Pool: d.Pool})
		return nil
	})
}

// org is a fresh organisation's principal.
func org(t *testing.T) *auth.Principal { return apptest.Organisation(t, env, "client") }

// site creates a site of p's organisation with API id id, and waits for the cache to have it.
func site(t *testing.T, g *WithT, p *auth.Principal, id string) {
	t.Helper()
	s := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "site-" + id,
		Labels: map[string]string{flexv1.IDLabel: id}}, Spec: flexv1.SiteSpec{Postcode: "SW1A 1AA"}}
	g.Expect(env.Client.Create(t.Context(), s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := svc.Sites.SiteInCache(t.Context(), p, id)
		g.Expect(err).NotTo(HaveOccurred())
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

// window is a valid event window: the next whole hour after one from now, for an hour.
func window() (time.Time, time.Time) {
	start := time.Now().UTC().Add(2 * time.Hour).Truncate(time.Hour)
	return start, start.Add(time.Hour)
}

func kindOf(err error) app.Kind {
	if e := app.As(err); e != nil {
		return e.Kind
	}
	return app.Internal
}

func TestCreateGetList(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	site(t, g, p, "s-1")
	start, end := window()
	rec, err := svc.Create(ctx, p, flexevents.CreateInput{Proposition: "limited_pause", Start: start, End: end,
		Direction: flexv1.FlexTurnDown, RateCentipence: 1250, SiteIDs: []string{"s-1", "s-1"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.ID).NotTo(BeEmpty())
	g.Expect(rec).To(And(
		HaveField("Proposition", flexv1.PropositionName("limited_pause")),
		HaveField("Market", "limited_pause"),
		HaveField("StartAt", start.Format(time.RFC3339)),
		HaveField("EndAt", end.Format(time.RFC3339)),
		HaveField("RatePencePerKWh", 12.5),
		HaveField("SiteIDs", []string{"s-1"}), // the same site twice is one
		HaveField("Status", "pending"),
		HaveField("Dispatches", flexevents.DispatchCounts{Skipped: map[string]int32{}})))

	got, err := svc.Get(ctx, p, rec.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(rec))

	g.Eventually(func(g Gomega) {
		list, err := svc.List(ctx, p)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list.Events).To(HaveLen(1))
		g.Expect(list.Events[0]).To(Equal(rec))
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

func TestCreateRefusesEachFieldAtFault(t *testing.T) {
	g := NewWithT(t)
	p := org(t)
	start, _ := window()
	_, err := svc.Create(t.Context(), p, flexevents.CreateInput{Proposition: "no_such_proposition",
		Start: start.Add(time.Minute), End: start, Direction: "sideways", RateCentipence: 1250,
		SiteIDs: []string{"unknown"}})
	g.Expect(kindOf(err)).To(Equal(app.Invalid), "%v", err)
	fields := app.As(err).Detail.([]app.FieldError)
	locs := make([][]any, 0, len(fields))
	for _, f := range fields {
		locs = append(locs, f.Loc)
	}
	g.Expect(locs).To(ContainElements(
		[]any{"body", "start_at"}, []any{"body", "end_at"}, []any{"body", "direction"},
		[]any{"body", "proposition"}, []any{"body", "site_ids", 0}))
}

// Another organisation's sites and events are not found: an event cannot name them, and its
// own cannot be read or cancelled from elsewhere.
func TestAnotherOrganisationsAreNotFound(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	mine, theirs := org(t), org(t)
	site(t, g, theirs, "theirs-1")
	start, end := window()
	in := flexevents.CreateInput{Proposition: "limited_pause", Start: start, End: end, Direction: flexv1.FlexTurnDown,
		RateCentipence: 1000, SiteIDs: []string{"theirs-1"}}
	_, err := svc.Create(ctx, mine, in)
	g.Expect(kindOf(err)).To(Equal(app.Invalid))
	g.Expect(app.As(err).Detail).To(ConsistOf(HaveField("Loc", []any{"body", "site_ids", 0})))

	rec, err := svc.Create(ctx, theirs, in)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = svc.Get(ctx, mine, rec.ID)
	g.Expect(err).To(MatchError(flexevents.ErrEventNotFound))
	_, err = svc.Cancel(ctx, mine, rec.ID)
	g.Expect(err).To(MatchError(flexevents.ErrEventNotFound))
	list, err := svc.List(ctx, mine)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Events).To(BeEmpty())

	// A household's token reads no event, not even its organisation's.
	household := &auth.Principal{Kind: auth.KindEndUser, Namespace: theirs.Namespace, SiteName: "site-theirs-1", UserID: "u"}
	_, err = svc.Get(ctx, household, rec.ID)
	g.Expect(err).To(MatchError(flexevents.ErrEventNotFound))
	for _, id := range []string{"", string(make([]byte, 254))} {
		_, err = svc.Get(ctx, theirs, id)
		g.Expect(err).To(MatchError(flexevents.ErrEventNotFound))
	}
}

func TestCancel(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	start, end := window()
	rec, err := svc.Create(ctx, p, flexevents.CreateInput{Proposition: "limited_pause", Start: start, End: end,
		Direction: flexv1.FlexTurnUp, RateCentipence: 500})
	g.Expect(err).NotTo(HaveOccurred())
	cancelled, err := svc.Cancel(ctx, p, rec.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cancelled.ID).To(Equal(rec.ID))
	g.Eventually(func(g Gomega) {
		_, err := svc.Get(ctx, p, rec.ID)
		g.Expect(err).To(MatchError(flexevents.ErrEventNotFound))
	}).WithTimeout(10 * time.Second).Should(Succeed())

	// An event whose window has ended is kept: refused, and still there.
	ended := &flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "ended"},
		Spec: flexv1.FlexEventSpec{Proposition: "limited_pause", StartAt: metav1.NewTime(start.Add(-48 * time.Hour)),
			EndAt: metav1.NewTime(end.Add(-48 * time.Hour)), Direction: flexv1.FlexTurnDown, RatePencePerKWh: "10"}}
	g.Expect(env.Client.Create(ctx, ended)).To(Succeed())
	_, err = svc.Cancel(ctx, p, "ended")
	g.Expect(err).To(MatchError(flexevents.ErrEventEnded))
	g.Expect(kindOf(err)).To(Equal(app.Conflict))
	g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: "ended"}, &flexv1.FlexEvent{})).To(Succeed())
}

// With the database down, a read that needs the dispatch counts is refused as unavailable,
// with advice on when to retry; with it back, the same read answers.
func TestDatabaseDownIsUnavailable(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	if database == nil || !database.CanStop() {
		t.Skip("no test database whose server this process runs (KUBEBUILDER_ASSETS, PostgreSQL, or $FLEXSITE_TEST_DATABASE_URL)")
	}
	p := org(t)
	start, end := window()
	rec, err := svc.Create(ctx, p, flexevents.CreateInput{Proposition: "limited_pause", Start: start, End: end,
		Direction: flexv1.FlexTurnDown, RateCentipence: 500})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(database.Stop()).To(Succeed())
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = database.Start(context.Background())
		}
	})
	for _, read := range []func() error{
		func() error { _, err := svc.Get(ctx, p, rec.ID); return err },
		func() error { _, err := svc.List(ctx, p); return err },
	} {
		err := read()
		var e *app.Error
		g.Expect(errors.As(err, &e)).To(BeTrue(), "%v", err)
		g.Expect(e.Kind).To(Equal(app.Unavailable))
		g.Expect(e.RetryAfter).NotTo(BeEmpty())
	}

	g.Expect(database.Start(ctx)).To(Succeed())
	restarted = true
	_, err = svc.Get(ctx, p, rec.ID)
	g.Expect(err).NotTo(HaveOccurred())
}

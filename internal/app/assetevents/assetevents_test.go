package assetevents_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/app/apptest"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/assetevents"
	"github.com/flexsite/flexsite/internal/asseteventstore"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/testenv"
)

// One API server, one indexed cache and one database for the package's tests, and the use
// cases built on them as cmd/manager builds them (no HTTP).
var (
	env      *testenv.Env
	database *dbtest.Database
	svc      *assetevents.Service
)

func TestMain(m *testing.M) {
	apptest.MainWithDatabase(m, func(_ context.Context, e *testenv.Env, households *app.Service, d *dbtest.Database) error {
		env, database = e, d
		svc = assetevents.New(households, &asseteventstore.Store{Pool: d.Pool})
		return nil
	})
}

func org(t *testing.T) *auth.Principal { return apptest.Organisation(t, env, "client") }

// asset creates a site of p's with one asset of type typ (API id id), and waits for the cache
// to have it.
func asset(t *testing.T, g *WithT, p *auth.Principal, id string, typ flexv1.AssetType) {
	t.Helper()
	ctx := t.Context()
	site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "site-" + id,
		Labels: map[string]string{flexv1.IDLabel: "site-" + id}}, Spec: flexv1.SiteSpec{Postcode: "SW1A 1AA"}}
	g.Expect(env.Client.Create(ctx, site)).To(Succeed())
	a := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: id, Labels: map[string]string{flexv1.IDLabel: id}},
		Spec: flexv1.AssetSpec{SiteName: site.Name, ExternalID: "ext-" + id, Type: typ, PowerW: ptr.To[int64](7400)}}
	if typ == flexv1.AssetTypeBattery {
		a.Spec.CapacityWh = ptr.To[int64](10000)
	}
	g.Expect(env.Client.Create(ctx, a)).To(Succeed())
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

var intent = &assetevents.Intent{EnergyRequiredKWh: 20, ReadyBy: "2026-11-30T07:30:00Z", ReadyByLocalTime: "07:30:00",
	ChargingMode: assetevents.MinimiseChargingTime}

// An intent told is the latest intent read back, with when it was received; a later one
// replaces it.
func TestRecordAndLatestIntent(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	asset(t, g, p, "ev-1", flexv1.AssetTypeCharger)

	_, err := svc.LatestIntent(ctx, p, "ev-1")
	g.Expect(err).To(MatchError(assetevents.ErrIntentNotFound))

	rec, err := svc.Record(ctx, p, "ev-1", assetevents.Event{Type: assetevents.IntentUpdate, Intent: intent})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.AssetID).To(Equal("ev-1"))
	g.Expect(rec.EventType).To(Equal(string(assetevents.IntentUpdate)))
	got, err := svc.LatestIntent(ctx, p, "ev-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.ReceivedAt).To(BeTemporally("==", rec.ReceivedAt))
	var back assetevents.Intent
	g.Expect(json.Unmarshal(got.Intent, &back)).To(Succeed())
	g.Expect(back).To(Equal(*intent))

	later := *intent
	later.EnergyRequiredKWh = 35
	_, err = svc.Record(ctx, p, "ev-1", assetevents.Event{Type: assetevents.IntentUpdate, Intent: &later})
	g.Expect(err).NotTo(HaveOccurred())
	got, err = svc.LatestIntent(ctx, p, "ev-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(got.Intent, &back)).To(Succeed())
	g.Expect(back.EnergyRequiredKWh).To(Equal(35.0))

	// A plug event and a tariff are kept, and leave the intent as it was.
	_, err = svc.Record(ctx, p, "ev-1", assetevents.Event{Type: assetevents.PlugIn, Vehicle: &assetevents.Vehicle{ChargingRateKW: 7}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = svc.Record(ctx, p, "ev-1", assetevents.Event{Type: assetevents.TariffUpdate,
		Tariff: &assetevents.Tariff{OffPeakTimes: "00:00-07:00", Timezone: "Europe/London"}})
	g.Expect(err).NotTo(HaveOccurred())
	got, err = svc.LatestIntent(ctx, p, "ev-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(got.Intent, &back)).To(Succeed())
	g.Expect(back.EnergyRequiredKWh).To(Equal(35.0))
}

func TestRecordRefusals(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	asset(t, g, p, "bat-1", flexv1.AssetTypeBattery)
	asset(t, g, p, "ev-2", flexv1.AssetTypeElectricVehicle)

	// Plug, intent and charge-now events are a charger's or an EV's; a tariff any asset's.
	_, err := svc.Record(ctx, p, "bat-1", assetevents.Event{Type: assetevents.PlugIn})
	g.Expect(kindOf(err)).To(Equal(app.Invalid))
	g.Expect(app.As(err).Detail).To(ConsistOf(HaveField("Loc", []any{"path", "asset_id"})))
	_, err = svc.Record(ctx, p, "bat-1", assetevents.Event{Type: assetevents.TariffUpdate,
		Tariff: &assetevents.Tariff{OffPeakTimes: "00:00-07:00", Timezone: "Europe/London"}})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = svc.Record(ctx, p, "ev-2", assetevents.Event{Type: assetevents.ChargeNow})
	g.Expect(kindOf(err)).To(Equal(app.Invalid))
	g.Expect(app.As(err).Detail).To(ConsistOf(HaveField("Loc", []any{"body", "end_at"})))
	end := time.Now().Add(time.Hour)
	_, err = svc.Record(ctx, p, "ev-2", assetevents.Event{Type: assetevents.ChargeNow, EndAt: &end})
	g.Expect(err).NotTo(HaveOccurred())

	for _, tariff := range []assetevents.Tariff{{OffPeakTimes: "whenever", Timezone: "Europe/London"},
		{OffPeakTimes: "00:00-07:00", Timezone: "Mars/Olympus"}} {
		_, err = svc.Record(ctx, p, "ev-2", assetevents.Event{Type: assetevents.TariffUpdate, Tariff: &tariff})
		g.Expect(kindOf(err)).To(Equal(app.BadRequest), "%+v: %v", tariff, err)
	}

	_, err = svc.Record(ctx, p, "no-such-asset", assetevents.Event{Type: assetevents.PlugOut})
	g.Expect(err).To(MatchError(app.ErrAssetNotFound))
	_, err = svc.LatestIntent(ctx, p, "no-such-asset")
	g.Expect(err).To(MatchError(assetevents.ErrIntentNotFound))

	household := &auth.Principal{Kind: auth.KindEndUser, Namespace: p.Namespace, SiteName: "site-ev-2", UserID: "u"}
	_, err = svc.Record(ctx, household, "ev-2", assetevents.Event{Type: assetevents.PlugOut})
	g.Expect(kindOf(err)).To(Equal(app.Forbidden))
	_, err = svc.LatestIntent(ctx, household, "ev-2")
	g.Expect(kindOf(err)).To(Equal(app.Forbidden))
}

// Another organisation's asset is not found: its events cannot be sent or read from elsewhere.
func TestAnotherOrganisationsAssetIsNotFound(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	mine, theirs := org(t), org(t)
	asset(t, g, theirs, "ev-theirs", flexv1.AssetTypeCharger)
	_, err := svc.Record(ctx, theirs, "ev-theirs", assetevents.Event{Type: assetevents.IntentUpdate, Intent: intent})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = svc.Record(ctx, mine, "ev-theirs", assetevents.Event{Type: assetevents.IntentUpdate, Intent: intent})
	g.Expect(err).To(MatchError(app.ErrAssetNotFound))
	_, err = svc.LatestIntent(ctx, mine, "ev-theirs")
	g.Expect(err).To(MatchError(assetevents.ErrIntentNotFound))
}

// With the database down an event is refused as unavailable (nothing kept) and the intent
// cannot be read, with advice on when to retry; with it back the same event is taken.
func TestDatabaseDownIsUnavailable(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	if database == nil || !database.CanStop() {
		t.Skip("no test database whose server this process runs (KUBEBUILDER_ASSETS, PostgreSQL, or $FLEXSITE_TEST_DATABASE_URL)")
	}
	p := org(t)
	asset(t, g, p, "ev-down", flexv1.AssetTypeCharger)
	g.Expect(database.Stop()).To(Succeed())
	up := false
	t.Cleanup(func() {
		if !up {
			_ = database.Start(context.Background())
		}
	})
	_, err := svc.Record(ctx, p, "ev-down", assetevents.Event{Type: assetevents.IntentUpdate, Intent: intent})
	g.Expect(err).To(MatchError(assetevents.ErrDatabaseUnavailable))
	g.Expect(app.As(err).RetryAfter).NotTo(BeEmpty())
	_, err = svc.LatestIntent(ctx, p, "ev-down")
	g.Expect(err).To(MatchError(assetevents.ErrDatabaseUnavailable))

	g.Expect(database.Start(ctx)).To(Succeed())
	up = true
	_, err = svc.LatestIntent(ctx, p, "ev-down")
	g.Expect(err).To(MatchError(assetevents.ErrIntentNotFound)) // nothing was kept
	_, err = svc.Record(ctx, p, "ev-down", assetevents.Event{Type: assetevents.IntentUpdate, Intent: intent})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = svc.LatestIntent(ctx, p, "ev-down")
	g.Expect(err).NotTo(HaveOccurred())
}

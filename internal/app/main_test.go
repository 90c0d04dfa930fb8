package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/apptest"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/testenv"
	"github.com/flexsite/flexsite/internal/validation"
)

// One API server, one indexed cache and one database for the package's tests, Flexsite's
// reconcilers running on them (a site's eligibility, an enrolment's phase and a site's
// deletion are theirs to compute), and the household use cases built on them as cmd/manager
// builds them (no HTTP). The test package is external (app_test): it may pass
// controllers.SetupWithManager in, where apptest may not import controllers.
var (
	env *testenv.Env
	svc *app.Service
	// counted is svc's twin whose writes are recorded (writes).
	counted *app.Service
	writes  = &writeLog{}
)

func TestMain(m *testing.M) {
	apptest.MainWithReconcilers(m, func(ctx context.Context, mgr ctrl.Manager, d *dbtest.Database) error {
		return controllers.SetupWithManager(ctx, mgr, controllers.Options{DB: d.Pool})
	}, func(ctx context.Context, e *testenv.Env, households *app.Service, _ *dbtest.Database) error {
		env, svc = e, households
		// The end user's tokens are signed with a key ring, as cmd/manager's are.
		const keys = "flexsite-system"
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keys}}
		if err := e.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		ring := auth.NewKeyRing(e.Client, e.Client, keys, "flexsite-token-keys")
		if err := ring.Ensure(ctx); err != nil {
			return err
		}
		svc.Issuer = auth.NewIssuer(ring, time.Now)
		counted = app.New(app.Config{Log: logr.Discard(), Cache: svc.Cache, APIReader: svc.APIReader,
			Client: countingClient{Client: e.Client, log: writes}})
		return nil
	})
}

// writeLog records the writes a countingClient tried, by namespace, and fails those a test
// asks it to (failing).
type writeLog struct {
	mu   sync.Mutex
	byNS map[string][]string
	fail func(verb string, obj client.Object) error
}

// add records a write and answers the failure to give instead of making it (nil: make it).
func (l *writeLog) add(verb string, obj client.Object) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byNS == nil {
		l.byNS = map[string][]string{}
	}
	l.byNS[obj.GetNamespace()] = append(l.byNS[obj.GetNamespace()], fmt.Sprintf("%s %T %s", verb, obj, obj.GetName()))
	if l.fail == nil {
		return nil
	}
	return l.fail(verb, obj)
}

// of are the writes tried in namespace ns so far.
func (l *writeLog) of(ns string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.byNS[ns])
}

// failing makes the writes for which fail answers an error fail with it, unmade, until the
// test ends.
func (l *writeLog) failing(t *testing.T, fail func(verb string, obj client.Object) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fail = fail
	t.Cleanup(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.fail = nil
	})
}

// countingClient writes through Client and records each write it tries (writeLog).
type countingClient struct {
	client.Client
	log *writeLog
}

func (c countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.log.add("create", obj); err != nil {
		return err
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if err := c.log.add("update", obj); err != nil {
		return err
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := c.log.add("patch", obj); err != nil {
		return err
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if err := c.log.add("delete", obj); err != nil {
		return err
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func org(t *testing.T) *auth.Principal { return apptest.Organisation(t, env, "client") }

var mpans int

// mpan is a fresh valid MPAN (its check digit right).
func mpan() string {
	mpans++
	first12 := fmt.Sprintf("19%010d", time.Now().UnixNano()%1e8*100+int64(mpans))
	return first12 + strconv.Itoa(validation.MPANCheckDigit(first12))
}

func siteInput(m, street string) app.SiteInput {
	return app.SiteInput{MPAN: m, SiteFields: household.SiteFields{Postcode: ptr.To("SW1A 1AA"), StreetAddress: ptr.To(street)}}
}

func kindOf(err error) app.Kind {
	if e := app.As(err); e != nil {
		return e.Kind
	}
	return app.Internal
}

// codeOf is the refusal's code ("" for an error that is not a refusal).
func codeOf(err error) string {
	if e := app.As(err); e != nil {
		return e.Code
	}
	return ""
}

// consent is a boundary meter consent given in the past, in whole seconds.
var consent = time.Date(2026, 1, 15, 10, 30, 0, 0, time.UTC)

// householdOf is an eligible household for limited_pause with MPAN m: a site with consent and
// an email, a charger of a CoP11-qualified model with its installation date, and a battery.
func householdOf(m string) app.OnboardInput {
	site := siteInput(m, "10 Downing Street")
	site.Email = ptr.To("resident@example.com")
	site.Consent = ptr.To(consent)
	return app.OnboardInput{UpsertInput: app.UpsertInput{Site: site, Assets: []app.AssetInput{
		{ExternalID: "charger-" + m, Type: flexv1.AssetTypeCharger, AssetFields: household.AssetFields{
			Model: ptr.To("zappi"), InstallationDate: ptr.To("2025-06-15"), PowerKW: ptr.To(7.4)}},
		{ExternalID: "battery-" + m, Type: flexv1.AssetTypeBattery, AssetFields: household.AssetFields{
			PowerKW: ptr.To(5.0), CapacityKWh: ptr.To(13.5)}},
	}}, Proposition: flexv1.PropositionLimitedPause}
}

// bareBattery is a household of MPAN m whose one asset, a battery of no known model, makes it
// eligible for nothing.
func bareBattery(m string) app.UpsertInput {
	in := householdOf(m).UpsertInput
	in.Assets = []app.AssetInput{{ExternalID: "bare-" + m, Type: flexv1.AssetTypeBattery}}
	return in
}

// objects is what namespace ns stores of the households' kinds, by kind and name, for
// comparing before and after a refusal (specs only: controllers move the statuses).
func objects(g Gomega, ctx context.Context, ns string) []string {
	sites, assets := &flexv1.SiteList{}, &flexv1.AssetList{}
	enrolments, claims := &flexv1.EnrolmentList{}, &flexv1.MPANClaimList{}
	for _, list := range []client.ObjectList{sites, assets, enrolments, claims} {
		g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	}
	out := make([]string, 0, len(sites.Items)+len(assets.Items)+len(enrolments.Items)+len(claims.Items))
	for _, s := range sites.Items {
		out = append(out, fmt.Sprintf("site %s %v %s", s.Name, s.Labels, specJSON(g, s.Spec)))
	}
	for _, a := range assets.Items {
		out = append(out, fmt.Sprintf("asset %s %v %s", a.Name, a.Labels, specJSON(g, a.Spec)))
	}
	for _, e := range enrolments.Items {
		out = append(out, fmt.Sprintf("enrolment %s %s", e.Name, specJSON(g, e.Spec)))
	}
	for _, c := range claims.Items {
		out = append(out, fmt.Sprintf("claim %s %s", c.Name, specJSON(g, c.Spec)))
	}
	return out
}

func specJSON(g Gomega, spec any) string {
	data, err := json.Marshal(spec)
	g.Expect(err).NotTo(HaveOccurred())
	return string(data)
}

// stored reads obj (by its namespace and name) as the API server has it.
func stored[T client.Object](g Gomega, ctx context.Context, obj T) T {
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	return obj
}

// gone reports whether obj is no longer stored.
func gone(ctx context.Context, obj client.Object) func(g Gomega) bool {
	return func(g Gomega) bool {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return true
		}
		g.Expect(err).NotTo(HaveOccurred())
		return false
	}
}

// eventually polls f for as long as a loaded machine may take the controllers to converge.
func eventually(g *WithT, f any) AsyncAssertion {
	return g.Eventually(f).WithTimeout(30 * time.Second).WithPolling(50 * time.Millisecond)
}

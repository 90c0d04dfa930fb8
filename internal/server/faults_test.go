package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/server"
)

// Fault injection over the real API server: each REST API instance here writes through a
// wrapper of the manager's own client (and reads through wrappers of its cache and API
// reader) that makes one chosen call fail the way a real API server or network does. The
// wrapper counts the writes of the one request sent to its instance, so "the k-th write"
// is exact. What is checked is the interface's promise: a failed onboard (initialise, legacy
// onboard, create asset) answers the documented error form and leaves no stored change; an
// offboard can be repeated to finish the job; a lost race is retried; a request that dies
// half-way leaves nothing behind once its in-flight deadline passes.

// faultMode is how the chosen write fails.
type faultMode int

const (
	// faultServerError: the API server answers 500; nothing was written.
	faultServerError faultMode = iota
	// faultTimeout: the API server answers 504 (timeout) before the write was stored.
	faultTimeout
	// faultTimeoutApplied: the write is sent to the API server (and stored, unless the
	// server refuses it), then the answer is lost to a timeout: the client cannot tell this
	// from faultTimeout. The rollback must undo such a write too (upsert.go, mayHaveApplied):
	// before it did, this fault left new assets, a changed site and even an enrolment behind
	// on an existing site after an error answer.
	faultTimeoutApplied
	// faultCrash: the process dies before the write: the handler panics, the connection drops.
	faultCrash
	// faultConflict: the first write of the request under optimistic concurrency (an update's
	// patch carries the resourceVersion it read) meets a Conflict (a stale read).
	faultConflict
	// faultAlreadyExists: the first Create of the request meets AlreadyExists (a lost race).
	faultAlreadyExists
)

func (f faultMode) String() string {
	return [...]string{"server error (500)", "timeout, not applied", "timeout after the write was applied", "crash",
		"conflict on the first update", "already-exists on the first create"}[f]
}

// faultClient is the manager's real client with one write made to fail: the failAt-th
// Create/Update/Patch/Delete (1-based; 0: none, it only counts), or for faultConflict and
// faultAlreadyExists the first Update or Create. It records every write in order.
type faultClient struct {
	client.Client
	fault  faultMode
	failAt int

	mu     sync.Mutex
	writes []string
	fired  string // the write that was made to fail, "" while none
}

func newFaultClient(fault faultMode, failAt int) *faultClient {
	return &faultClient{Client: apiSrv.Client, fault: fault, failAt: failAt}
}

func faultKindOf(obj any) string { return reflect.TypeOf(obj).Elem().Name() }

func (c *faultClient) intercept(verb string, locked bool, obj client.Object, write func() error) error {
	c.mu.Lock()
	desc := fmt.Sprintf("%s %s/%s", verb, faultKindOf(obj), obj.GetName())
	c.writes = append(c.writes, desc)
	n := len(c.writes)
	var hit bool
	switch c.fault {
	case faultConflict:
		hit = locked
	case faultAlreadyExists:
		hit = verb == "Create"
	default:
		hit = n == c.failAt
	}
	hit = hit && c.fired == ""
	if hit {
		c.fired = desc
	}
	c.mu.Unlock()
	if !hit {
		return write()
	}
	gr := schema.GroupResource{Group: flexv1.GroupVersion.Group, Resource: strings.ToLower(faultKindOf(obj)) + "s"}
	switch c.fault {
	case faultServerError:
		return apierrors.NewInternalError(errors.New("injected: etcdserver: leader changed"))
	case faultTimeout:
		return apierrors.NewTimeoutError("injected: request did not complete within the allowed duration", 1)
	case faultTimeoutApplied:
		// The write goes to the API server; whatever it answered, the client sees a timeout.
		_ = write()
		return apierrors.NewTimeoutError("injected: request did not complete within the allowed duration", 1)
	case faultCrash:
		// What net/http recovers silently: the request dies, the server lives on.
		panic(http.ErrAbortHandler)
	case faultConflict:
		return apierrors.NewConflict(gr, obj.GetName(), errors.New("injected: the object has been modified"))
	default:
		return apierrors.NewAlreadyExists(gr, obj.GetName())
	}
}

func (c *faultClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.intercept("Create", false, obj, func() error { return c.Client.Create(ctx, obj, opts...) })
}

func (c *faultClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	return c.intercept("Update", true, obj, func() error { return c.Client.Update(ctx, obj, opts...) })
}

func (c *faultClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	// A patch under optimistic concurrency carries the resourceVersion it was computed from.
	data, err := patch.Data(obj)
	locked := err == nil && bytes.Contains(data, []byte(`"resourceVersion"`))
	return c.intercept("Patch", locked, obj, func() error { return c.Client.Patch(ctx, obj, patch, opts...) })
}

func (c *faultClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	return c.intercept("Delete", false, obj, func() error { return c.Client.Delete(ctx, obj, opts...) })
}

// state returns the writes so far and the one that failed.
func (c *faultClient) state() (writes []string, fired string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.writes...), c.fired
}

// faultReads makes the failAt-th read (Get or List, cache or API reader alike) of a request
// fail with a timeout, and notes how many writes the request had made by then.
type faultReads struct {
	failAt int
	writes *faultClient

	mu           sync.Mutex
	reads        []string
	fired        string
	writesAtFire int
}

type faultReader struct {
	client.Reader
	source string
	f      *faultReads
}

func (r faultReader) fail(what string) error {
	f := r.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads = append(f.reads, r.source+" "+what)
	if len(f.reads) != f.failAt || f.fired != "" {
		return nil
	}
	f.fired = f.reads[len(f.reads)-1]
	w, _ := f.writes.state()
	f.writesAtFire = len(w)
	return apierrors.NewTimeoutError("injected: read did not complete within the allowed duration", 1)
}

func (r faultReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := r.fail("Get " + faultKindOf(obj)); err != nil {
		return err
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

func (r faultReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.fail("List " + faultKindOf(list)); err != nil {
		return err
	}
	return r.Reader.List(ctx, list, opts...)
}

func (f *faultReads) state() (reads int, fired string, writesAtFire int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reads), f.fired, f.writesAtFire
}

// faultInFlightTimeout is the in-flight deadline of the fault-injection instances: short, so
// a stray site left by a write whose outcome the request could not know (faultTimeoutApplied)
// is removed within the spec, yet far longer than a successful request takes.
const faultInFlightTimeout = 5 * time.Second

// faultyFacade serves a server instance that writes through c and, when reads is set, reads
// through it.
func faultyFacade(c *faultClient, reads *faultReads, inFlight time.Duration) (string, func()) {
	cfg := apiSrv.Config
	cfg.Client = c
	cfg.InFlightTimeout = inFlight
	if reads != nil {
		cfg.Cache = faultReader{Reader: apiSrv.Cache, source: "cache", f: reads}
		cfg.APIReader = faultReader{Reader: apiSrv.APIReader, source: "api", f: reads}
	}
	srv := httptest.NewServer(server.NewServer(cfg))
	return srv.URL, srv.Close
}

// faultExpectErrorForm checks the documented error answer of a server-side failure: a 5xx whose
// JSON body is {"detail": "<message>"}.
func faultExpectErrorForm(g Gomega, a relAnswer) {
	g.Expect(a.err).NotTo(HaveOccurred())
	g.Expect(a.status).To(And(BeNumerically(">=", 500), BeNumerically("<", 600)), "%s", a)
	g.Expect(a.json()).To(And(HaveLen(1), HaveKeyWithValue("detail", BeAssignableToTypeOf(""))), "%s", a)
}

// faultEnv is the organisation a fault spec works in.
type faultEnv struct {
	ns, tok string
}

// faultExpectFired fails a sweep over k that injected no fault although the reference request
// made operations (writes or reads) to fail: the sweep's checks of the error form and of the
// recovery then ran on requests that never met a fault, and proved nothing. The k-th of them
// fails for every k up to that count (a request's first k-1 are the reference's), so at least
// the first one must have.
func faultExpectFired(fired, operations int) {
	if operations > 0 {
		ExpectWithOffset(1, fired).To(BeNumerically(">", 0),
			"no fault fired in a sweep over %d operations: it proved nothing about recovery", operations)
	}
}

// faultRequest is one request under fault injection, and what a 200 must have stored.
type faultRequest struct {
	method string // POST when empty
	path   string
	body   any
	check  func(ctx context.Context, g Gomega, answer map[string]any, repeat bool)
}

// send sends the request to the REST API at base.
func (r faultRequest) send(base, token string) relAnswer {
	method := r.method
	if method == "" {
		method = http.MethodPost
	}
	return relSend(relHTTP, method, base, r.path, token, r.body)
}

// faultCase is an endpoint under fault injection: prepare stores what the i-th request
// needs (through the normal REST API, waiting until the controllers have settled) and returns
// the request.
type faultCase struct {
	name    string
	prepare func(ctx context.Context, e faultEnv, i int) faultRequest
}

// faultMPAN is the MPAN of the i-th request of a fault spec.
func faultMPAN(i int) string { return validMPAN(5000 + i) }

// faultSettled waits until the controllers have published a site (and, when enrolled, made its
// enrolment active), so that they do not write while a fault spec compares snapshots.
func faultSettled(ctx context.Context, ns, mpan string, enrolled ...flexv1.PropositionName) {
	GinkgoHelper()
	siteName := identity.SiteNameForMPAN(mpan)
	Eventually(func(g Gomega) {
		site := &flexv1.Site{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: siteName}, site)).To(Succeed())
		g.Expect(relProvisioned(site)).To(BeTrue())
		for _, p := range enrolled {
			e := &flexv1.Enrolment{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: identity.EnrolmentName(siteName, p)}, e)).To(Succeed())
			g.Expect(e.Status.Phase).To(Equal(flexv1.EnrolmentActive))
		}
	}).Should(Succeed())
}

// faultExpectHousehold checks what a 200 stored for a site: the site under its answered id,
// exactly the assets and enrolments named, and (in-flight protocol) published by the
// controller.
func faultExpectHousehold(ctx context.Context, g Gomega, ns, mpan string, siteID any, externalIDs []string,
	props ...flexv1.PropositionName) {
	siteName := identity.SiteNameForMPAN(mpan)
	st := relOfSite(ctx, g, ns, siteName)
	g.Expect(st.sites).To(HaveLen(1))
	g.Expect(st.sites[0].Labels[flexv1.IDLabel]).To(Equal(siteID))
	want := make([]string, 0, 1+len(externalIDs)+len(props))
	want = append(want, "Site/"+siteName)
	for _, x := range externalIDs {
		want = append(want, "Asset/"+identity.AssetName(x))
	}
	for _, p := range props {
		want = append(want, "Enrolment/"+identity.EnrolmentName(siteName, p))
	}
	g.Expect(st.names()).To(ConsistOf(want))
	g.Eventually(func(g Gomega) {
		site := &flexv1.Site{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: siteName}, site)).To(Succeed())
		g.Expect(relProvisioned(site)).To(BeTrue(), "the Site controller publishes a completed site")
	}).WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
}

func faultSiteID(answer map[string]any) any { return answer["site"].(map[string]any)["site_id"] }

var (
	faultLP   = flexv1.PropositionLimitedPause
	faultFASC = flexv1.PropositionFullAssetScheduleControl
)

// The endpoints under fault injection. "existing" variants change a stored, enrolled site:
// a new email, two new assets and a second enrolment, so the request updates, creates and
// enrols, and its rollback has to restore as well as delete.
var (
	caseOnboardNew = faultCase{name: "onboard (new household)", prepare: func(_ context.Context, e faultEnv, i int) faultRequest {
		mpan := faultMPAN(i)
		return faultRequest{path: "/entities/site/onboard", body: household(mpan),
			check: func(ctx context.Context, g Gomega, answer map[string]any, repeat bool) {
				faultExpectHousehold(ctx, g, e.ns, mpan, faultSiteID(answer), []string{"charger-" + mpan, "battery-" + mpan}, faultLP)
				if !repeat {
					g.Expect(answer["enrolment"].(map[string]any)["status"]).To(Equal("enrolled"))
				}
			}}
	}}
	caseOnboardExisting = faultCase{name: "onboard (new assets onto an existing site)",
		prepare: func(ctx context.Context, e faultEnv, i int) faultRequest {
			mpan := faultMPAN(i)
			mustCall("POST", "/entities/site/onboard", e.tok, household(mpan))
			faultSettled(ctx, e.ns, mpan, faultLP)
			body := household(mpan, func(b map[string]any) {
				b["site"].(map[string]any)["email"] = fmt.Sprintf("moved-%d@example.com", i)
				b["assets"] = []any{
					b["assets"].([]any)[0],
					map[string]any{"external_id": "heat-pump-" + mpan, "type": "heat pump", "properties": map[string]any{"power_kw": 3}},
					map[string]any{"external_id": "tank-" + mpan, "type": "hot water tank", "properties": map[string]any{"power_kw": 3}},
				}
				b["proposition"] = string(faultFASC)
			})
			return faultRequest{path: "/entities/site/onboard", body: body,
				check: func(ctx context.Context, g Gomega, answer map[string]any, repeat bool) {
					faultExpectHousehold(ctx, g, e.ns, mpan, faultSiteID(answer),
						[]string{"charger-" + mpan, "battery-" + mpan, "heat-pump-" + mpan, "tank-" + mpan}, faultLP, faultFASC)
					if !repeat {
						g.Expect(answer["site"].(map[string]any)["fields_updated"]).To(ConsistOf("email"))
						g.Expect(answer["enrolment"].(map[string]any)["status"]).To(Equal("enrolled"))
					}
				}}
		}}
	caseInitialiseNew = faultCase{name: "initialise (new household)", prepare: func(_ context.Context, e faultEnv, i int) faultRequest {
		mpan := faultMPAN(i)
		return faultRequest{path: "/entities/site/initialise", body: household(mpan, func(b map[string]any) { delete(b, "proposition") }),
			check: func(ctx context.Context, g Gomega, answer map[string]any, repeat bool) {
				faultExpectHousehold(ctx, g, e.ns, mpan, faultSiteID(answer), []string{"charger-" + mpan, "battery-" + mpan})
			}}
	}}
	caseInitialiseExisting = faultCase{name: "initialise (new asset onto an existing site)",
		prepare: func(ctx context.Context, e faultEnv, i int) faultRequest {
			mpan := faultMPAN(i)
			mustCall("POST", "/entities/site/initialise", e.tok, household(mpan, func(b map[string]any) { delete(b, "proposition") }))
			faultSettled(ctx, e.ns, mpan)
			body := household(mpan, func(b map[string]any) {
				delete(b, "proposition")
				b["site"].(map[string]any)["email"] = fmt.Sprintf("moved-%d@example.com", i)
				b["assets"] = append(b["assets"].([]any),
					map[string]any{"external_id": "heat-pump-" + mpan, "type": "heat pump", "properties": map[string]any{"power_kw": 3}})
			})
			return faultRequest{path: "/entities/site/initialise", body: body,
				check: func(ctx context.Context, g Gomega, answer map[string]any, repeat bool) {
					faultExpectHousehold(ctx, g, e.ns, mpan, faultSiteID(answer),
						[]string{"charger-" + mpan, "battery-" + mpan, "heat-pump-" + mpan})
					if !repeat {
						g.Expect(answer["site"].(map[string]any)["fields_updated"]).To(ConsistOf("email"))
					}
				}}
		}}
	caseLegacyNew = faultCase{name: "legacy onboard-site-and-asset", prepare: func(_ context.Context, e faultEnv, i int) faultRequest {
		mpan := faultMPAN(i)
		site := household(mpan)["site"]
		body := map[string]any{"site": site,
			"asset": map[string]any{"external_id": "legacy-" + mpan, "type": "charger", "properties": map[string]any{"power_kw": 7}},
			"dispatch_consent": map[string]any{"dispatch_methods": []any{"cm_infrequent_dispatch", "limited_pause",
				"full_asset_schedule_control"}}}
		return faultRequest{path: "/entities/site/onboard-site-and-asset", body: body,
			check: func(ctx context.Context, g Gomega, answer map[string]any, repeat bool) {
				faultExpectHousehold(ctx, g, e.ns, mpan, answer["site"].(map[string]any)["id"], []string{"legacy-" + mpan}, faultLP, faultFASC)
			}}
	}}
	caseCreateAsset = faultCase{name: "create asset", prepare: func(ctx context.Context, e faultEnv, i int) faultRequest {
		mpan := faultMPAN(i)
		siteID := faultSiteID(mustCall("POST", "/entities/site/onboard", e.tok, household(mpan)))
		faultSettled(ctx, e.ns, mpan, faultLP)
		body := map[string]any{"external_id": "extra-" + mpan, "type": "battery", "site_id": siteID,
			"properties": map[string]any{"power_kw": 3, "capacity_kwh": 9.5}}
		return faultRequest{path: "/entities/asset", body: body,
			check: func(ctx context.Context, g Gomega, answer map[string]any, repeat bool) {
				g.Expect(answer["site_id"]).To(Equal(siteID))
				faultExpectHousehold(ctx, g, e.ns, mpan, siteID, []string{"charger-" + mpan, "battery-" + mpan, "extra-" + mpan}, faultLP)
			}}
	}}
	caseEnrolOverride = faultCase{name: "enrol (override_withdrawal on a stored enrolment)",
		prepare: func(ctx context.Context, e faultEnv, i int) faultRequest {
			mpan := faultMPAN(i)
			siteID := faultSiteID(mustCall("POST", "/entities/site/onboard", e.tok, household(mpan)))
			faultSettled(ctx, e.ns, mpan, faultLP)
			return faultRequest{path: fmt.Sprintf("/entities/site/%s/enrol", siteID),
				body: map[string]any{"proposition": "limited_pause", "override_withdrawal": true},
				check: func(ctx context.Context, g Gomega, answer map[string]any, repeat bool) {
					if !repeat {
						g.Expect(answer).To(Equal(map[string]any{"site_id": siteID, "status": "already_enrolled"}))
					}
					enr := &flexv1.Enrolment{}
					g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: e.ns,
						Name: identity.EnrolmentName(identity.SiteNameForMPAN(mpan), faultLP)}, enr)).To(Succeed())
					g.Expect(enr.Spec.OverrideWithdrawal).To(BeTrue())
				}}
		}}
	caseMeterConsent = faultCase{name: "meter-consent", prepare: func(ctx context.Context, e faultEnv, i int) faultRequest {
		mpan := faultMPAN(i)
		siteID := faultSiteID(mustCall("POST", "/entities/site/onboard", e.tok, household(mpan)))
		faultSettled(ctx, e.ns, mpan, faultLP)
		return faultRequest{path: fmt.Sprintf("/entities/site/%s/meter-consent", siteID),
			body: map[string]any{"gave_boundary_meter_consent_at": "2026-02-01T09:00:00Z"},
			check: func(ctx context.Context, g Gomega, _ map[string]any, _ bool) {
				site := &flexv1.Site{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: identity.SiteNameForMPAN(mpan)}, site)).To(Succeed())
				g.Expect(site.Spec.BoundaryMeterConsentAt.Time).To(BeTemporally("==", time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC)))
			}}
	}}
)

// The dispatch consent cases: an enrolled household whose consent one request changes.
var (
	caseDispatchConsent = faultCase{name: "dispatch-consent", prepare: func(ctx context.Context, e faultEnv, i int) faultRequest {
		mpan := faultMPAN(i)
		siteID := faultSiteID(mustCall("POST", "/entities/site/onboard", e.tok, household(mpan)))
		faultSettled(ctx, e.ns, mpan, faultLP)
		return faultRequest{path: fmt.Sprintf("/entities/site/%s/dispatch-consent", siteID),
			body:  map[string]any{"dispatch_methods": []any{"limited_pause", "vpp_limited_control"}},
			check: faultExpectDispatch(e, mpan, "limited_pause", "vpp_limited_control")}
	}}
	caseDispatchDeconsent = faultCase{name: "dispatch-deconsent", prepare: func(ctx context.Context, e faultEnv, i int) faultRequest {
		mpan := faultMPAN(i)
		siteID := faultSiteID(mustCall("POST", "/entities/site/onboard", e.tok, household(mpan)))
		mustCall("POST", fmt.Sprintf("/entities/site/%s/dispatch-consent", siteID), e.tok,
			map[string]any{"dispatch_methods": []any{"limited_pause", "cm_infrequent_dispatch", "vpp_limited_control"}})
		faultSettled(ctx, e.ns, mpan, faultLP)
		return faultRequest{path: fmt.Sprintf("/entities/site/%s/dispatch-deconsent", siteID),
			body:  map[string]any{"dispatch_methods": []any{"cm_infrequent_dispatch"}},
			check: faultExpectDispatch(e, mpan, "limited_pause", "vpp_limited_control")}
	}}
)

// faultExpectDispatch checks what a 200 of dispatch consent stored: the methods, in order, in
// the answer and on the site.
func faultExpectDispatch(e faultEnv, mpan string, methods ...string) func(context.Context, Gomega, map[string]any, bool) {
	return func(ctx context.Context, g Gomega, answer map[string]any, _ bool) {
		want := make([]any, 0, len(methods))
		stored := make([]flexv1.DispatchMethod, 0, len(methods))
		for _, m := range methods {
			want, stored = append(want, m), append(stored, flexv1.DispatchMethod(m))
		}
		g.Expect(answer["dispatch_methods"]).To(Equal(want))
		site := &flexv1.Site{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: identity.SiteNameForMPAN(mpan)}, site)).To(Succeed())
		g.Expect(site.Spec.DispatchMethods).To(Equal(stored))
	}
}

// caseUpdateSite changes a stored site's email and tariff (PATCH /entities/site).
var caseUpdateSite = faultCase{name: "update site (PATCH)", prepare: func(ctx context.Context, e faultEnv, i int) faultRequest {
	mpan := faultMPAN(i)
	siteID := faultSiteID(mustCall("POST", "/entities/site/onboard", e.tok, household(mpan)))
	faultSettled(ctx, e.ns, mpan, faultLP)
	return faultRequest{method: http.MethodPatch, path: fmt.Sprintf("/entities/site/%s", siteID),
		body: map[string]any{"email": "patched@example.com",
			"tariff": map[string]any{"tariff_type": "dual_rate", "tariff_cheap_start_time": "00:30", "tariff_cheap_end_time": "04:30"}},
		check: func(ctx context.Context, g Gomega, answer map[string]any, _ bool) {
			g.Expect(answer["id"]).To(Equal(siteID))
			site := &flexv1.Site{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: identity.SiteNameForMPAN(mpan)}, site)).To(Succeed())
			g.Expect(site.Spec.Email).To(Equal("patched@example.com"))
			g.Expect(site.Spec.Tariff).To(Equal(&flexv1.Tariff{Type: "dual_rate", CheapStartTime: "00:30", CheapEndTime: "04:30"}))
		}}
}}

// caseMoveSite changes a stored site's MPAN: a claim, then the site (household/claim.go).
var caseMoveSite = faultCase{name: "change a site's MPAN (PATCH)", prepare: func(ctx context.Context, e faultEnv, i int) faultRequest {
	mpan, moved := faultMPAN(i), faultMPAN(500+i)
	siteID := faultSiteID(mustCall("POST", "/entities/site/onboard", e.tok, household(mpan)))
	faultSettled(ctx, e.ns, mpan, faultLP)
	return faultRequest{method: http.MethodPatch, path: fmt.Sprintf("/entities/site/%s", siteID), body: map[string]any{"mpan": moved},
		check: func(ctx context.Context, g Gomega, answer map[string]any, _ bool) {
			g.Expect(answer).To(HaveKeyWithValue("id", siteID))
			g.Expect(answer).To(HaveKeyWithValue("mpan", moved))
			site := &flexv1.Site{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: identity.SiteNameForMPAN(mpan)}, site)).To(Succeed())
			g.Expect(site.Spec.MPAN).To(Equal(moved))
			claim := &flexv1.MPANClaim{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: identity.MPANClaimName(moved)}, claim)).To(Succeed())
			g.Expect(claim.Spec.SiteName).To(Equal(site.Name))
		}}
}}

// caseUpdateAsset fills in a stored asset's model, installation date and one property.
var caseUpdateAsset = faultCase{name: "update asset (PATCH)", prepare: func(ctx context.Context, e faultEnv, i int) faultRequest {
	mpan := faultMPAN(i)
	mustCall("POST", "/entities/site/onboard", e.tok, household(mpan))
	faultSettled(ctx, e.ns, mpan, faultLP)
	battery := entityStoredAsset(ctx, e.ns, "battery-"+mpan)
	id := battery.Labels[flexv1.IDLabel]
	return faultRequest{method: http.MethodPatch, path: "/entities/asset/" + id,
		body: map[string]any{"asset_model": "givenergy_all_in_one", "installation_date": "2025-03-01",
			"properties": map[string]any{"capacity_kwh": 9.5}},
		check: func(ctx context.Context, g Gomega, answer map[string]any, _ bool) {
			g.Expect(answer["id"]).To(Equal(id))
			g.Expect(answer["properties"]).To(Equal(map[string]any{"power_kw": 5.0, "capacity_kwh": 9.5}))
			stored := &flexv1.Asset{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(battery), stored)).To(Succeed())
			g.Expect(stored.Spec.Model).To(Equal("givenergy_all_in_one"))
			g.Expect(stored.Spec.InstallationDate).To(Equal("2025-03-01"))
			g.Expect(stored.Spec.PowerW).To(HaveValue(Equal(int64(5000))))
			g.Expect(stored.Spec.CapacityWh).To(HaveValue(Equal(int64(9500))))
		}}
}}

// faultProblems collects the failures of a spec that walks many fault points, so that one
// run reports every point that broke rather than the first.
type faultProblems struct {
	list []string
	at   string
}

func (p *faultProblems) gomega() Gomega {
	return NewGomega(func(message string, _ ...int) { p.list = append(p.list, p.at+": "+message) })
}

// faultSoon is Eventually on a problem collector, with the suite's timings.
func faultSoon(g Gomega, f any) AsyncAssertion {
	return g.Eventually(f).WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond)
}

// faultReferenceWrites runs the case once through a counting (never failing) instance and
// returns the writes of the successful request.
func faultReferenceWrites(ctx context.Context, e faultEnv, c faultCase) []string {
	GinkgoHelper()
	req := c.prepare(ctx, e, 0)
	counter := newFaultClient(faultServerError, 0)
	url, done := faultyFacade(counter, nil, faultInFlightTimeout)
	a := req.send(url, e.tok)
	done()
	Expect(a.err).NotTo(HaveOccurred())
	Expect(a.status).To(Equal(http.StatusOK), "%s", a)
	req.check(ctx, Default, a.json(), false)
	writes, _ := counter.state()
	return writes
}

// faultDiff compares two snapshots line by line: "- line" was stored before and is not now,
// "+ line" is stored now and was not before.
func faultDiff(before, after string) []string {
	was, is := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(before, "\n") {
		was[l] = true
	}
	for _, l := range strings.Split(after, "\n") {
		is[l] = true
	}
	var out []string
	for _, l := range strings.Split(before, "\n") {
		if !is[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(after, "\n") {
		if !was[l] {
			out = append(out, "+ "+l)
		}
	}
	return out
}

// faultEntry is a table entry of one endpoint under one fault.
func faultEntry(c faultCase, f faultMode) TableEntry { return Entry(c.name+", "+f.String(), c, f) }

var faultCases = []faultCase{caseOnboardNew, caseOnboardExisting, caseInitialiseNew, caseInitialiseExisting, caseLegacyNew, caseCreateAsset,
	caseDispatchConsent, caseDispatchDeconsent, caseUpdateAsset, caseUpdateSite, caseMoveSite, caseCreateSite,
	caseCreateSiteMoved}

var _ = Describe("Reliability: injected write faults", func() {
	var e faultEnv
	BeforeEach(func(ctx SpecContext) {
		o := newOrg(ctx)
		e = faultEnv{ns: o.Namespace, tok: o.token()}
	})

	// For k = 1 .. (writes of a successful request)+1, the k-th write fails: the answer is the
	// documented error form and nothing stored changes (once the rollback's deletions have
	// finished), or, when the request made fewer than k writes, a 200 with everything stored.
	entries := make([]TableEntry, 0, 3*len(faultCases))
	for _, fault := range []faultMode{faultServerError, faultTimeout, faultTimeoutApplied} {
		for _, c := range faultCases {
			entries = append(entries, faultEntry(c, fault))
		}
	}
	DescribeTable("the k-th write fails: the documented error and no stored change, for every k",
		func(ctx SpecContext, c faultCase, fault faultMode) {
			reference := faultReferenceWrites(ctx, e, c)
			problems := &faultProblems{}
			fired, repeated := 0, 0
			for k := 1; k <= len(reference)+1; k++ {
				problems.at = fmt.Sprintf("k=%d", k)
				g := problems.gomega()
				req := c.prepare(ctx, e, k)
				before := snapshot(Default, ctx, e.ns)
				fc := newFaultClient(fault, k)
				url, done := faultyFacade(fc, nil, faultInFlightTimeout)
				a := req.send(url, e.tok)
				done()
				writes, failed := fc.state()
				problems.at = fmt.Sprintf("k=%d (failed: %q; writes: %v)", k, failed, writes)
				if failed == "" {
					g.Expect(a.status).To(Equal(http.StatusOK), "no write failed, so the request succeeds: %s", a)
					if a.status == http.StatusOK {
						req.check(ctx, g, a.json(), false)
					}
					continue
				}
				fired++
				faultExpectErrorForm(g, a)
				faultSoon(g, func() []string { return faultDiff(before, snapshot(Default, ctx, e.ns)) }).
					Should(BeEmpty(), "a failed request leaves no stored change (- lost, + left behind)")
				again := req.send(apiServer.URL, e.tok)
				if g.Expect(again.status).To(Equal(http.StatusOK), "the same request sent again succeeds: %s", again) {
					repeated++
					req.check(ctx, g, again.json(), true)
				}
			}
			GinkgoWriter.Printf("FIGURES write-fault %q %q: %d writes in a successful request %v; %d k values, %d faults injected, %d repeats answered 200, %d problems\n",
				c.name, fault, len(reference), reference, len(reference)+1, fired, repeated, len(problems.list))
			faultExpectFired(fired, len(reference))
			Expect(problems.list).To(BeEmpty())
		}, entries)

	offboardFaults := make([]TableEntry, 0, 3)
	for _, fault := range []faultMode{faultServerError, faultTimeout, faultTimeoutApplied} {
		offboardFaults = append(offboardFaults, Entry(fault.String(), fault))
	}
	DescribeTable("offboard: the k-th write fails: an error, and repeating the request finishes the job",
		func(ctx SpecContext, fault faultMode) {
			// stored stores an enrolled site with two assets and a reward ledger.
			stored := func(i int) (mpan, siteID string) {
				mpan = faultMPAN(i)
				siteID = faultSiteID(mustCall("POST", "/entities/site/onboard", e.tok, household(mpan))).(string)
				Expect(k8sClient.Create(ctx, &flexv1.RewardLedger{
					ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: identity.RewardLedgerName(identity.SiteNameForMPAN(mpan))},
					Spec: flexv1.RewardLedgerSpec{SiteName: identity.SiteNameForMPAN(mpan), Transactions: []flexv1.RewardTransaction{
						{ID: identity.NewID(), Type: "signup bonus", CreditPence: 500}}},
				})).To(Succeed())
				faultSettled(ctx, e.ns, mpan, faultLP)
				return mpan, siteID
			}
			gone := func(g Gomega, mpan string) {
				faultSoon(g, func(g Gomega) []string {
					return relOfSite(ctx, g, e.ns, identity.SiteNameForMPAN(mpan)).names()
				}).Should(BeEmpty(), "site, assets, enrolments and ledger are gone")
			}
			path := func(siteID string) string { return "/entities/site/" + siteID + "/offboard-site-and-assets" }

			mpan, siteID := stored(0)
			Expect(relOfSite(ctx, Default, e.ns, identity.SiteNameForMPAN(mpan)).names()).To(HaveLen(5))
			counter := newFaultClient(fault, 0)
			url, done := faultyFacade(counter, nil, faultInFlightTimeout)
			a := relPost(relHTTP, url, path(siteID), e.tok, nil)
			done()
			Expect(a.status).To(Equal(http.StatusOK), "%s", a)
			gone(Default, mpan)
			reference, _ := counter.state()

			problems := &faultProblems{}
			fired, repeatedNotFound := 0, 0
			for k := 1; k <= len(reference)+1; k++ {
				problems.at = fmt.Sprintf("k=%d", k)
				g := problems.gomega()
				mpan, siteID := stored(k)
				fc := newFaultClient(fault, k)
				url, done := faultyFacade(fc, nil, faultInFlightTimeout)
				a := relPost(relHTTP, url, path(siteID), e.tok, nil)
				done()
				writes, failed := fc.state()
				problems.at = fmt.Sprintf("k=%d (failed: %q; writes: %v)", k, failed, writes)
				if failed == "" {
					g.Expect(a.status).To(Equal(http.StatusOK), "%s", a)
					gone(g, mpan)
					continue
				}
				fired++
				faultExpectErrorForm(g, a)
				again := relPost(relHTTP, apiServer.URL, path(siteID), e.tok, nil)
				// The site is found, and offboarded, until its deletion completes; after that the
				// repeat can only say it is not there (404), which needs the first request to have
				// started that deletion.
				siteDeleteStarted := !strings.HasPrefix(failed, "Delete Site/") || fault == faultTimeoutApplied
				switch {
				case again.status == http.StatusOK:
				case again.status == http.StatusNotFound && siteDeleteStarted:
					repeatedNotFound++
				default:
					g.Expect(again.status).To(Equal(http.StatusOK), "the repeated offboard: %s", again)
				}
				gone(g, mpan)
			}
			GinkgoWriter.Printf("FIGURES offboard-fault %q: %d writes in a successful offboard %v; %d k values, %d faults injected, "+
				"%d repeats answered 404 (site already gone), %d problems\n",
				fault, len(reference), reference, len(reference)+1, fired, repeatedNotFound, len(problems.list))
			faultExpectFired(fired, len(reference))
			Expect(problems.list).To(BeEmpty())
		}, offboardFaults)

	DescribeTable("delete asset: the k-th write fails: the error form and the asset intact, or 204 when the delete took effect",
		func(ctx SpecContext, fault faultMode) {
			// stored onboards a household and answers its charger's name and id.
			stored := func(i int) (name, id string) {
				mpan := faultMPAN(i)
				mustCall("POST", "/entities/site/onboard", e.tok, household(mpan))
				faultSettled(ctx, e.ns, mpan, faultLP)
				charger := entityStoredAsset(ctx, e.ns, "charger-"+mpan)
				return charger.Name, charger.Labels[flexv1.IDLabel]
			}
			del := func(base, id string) relAnswer {
				return relSend(relHTTP, http.MethodDelete, base, "/entities/asset/"+id, e.tok, nil)
			}
			// deleted: the snapshot lost the asset's line, and nothing else changed (the lines
			// that name the asset otherwise are its site's, whose in-flight marker names it).
			deleted := func(g Gomega, before, name string) {
				faultSoon(g, func() string { return snapshot(Default, ctx, e.ns) }).Should(And(
					Not(ContainSubstring("asset "+name+" ")), WithTransform(func(after string) string { return entityLinesWithout(after, name) },
						Equal(entityLinesWithout(before, name)))), "the asset is gone, and only it")
			}

			_, id := stored(0)
			counter := newFaultClient(fault, 0)
			url, done := faultyFacade(counter, nil, faultInFlightTimeout)
			a := del(url, id)
			done()
			Expect(a.status).To(Equal(http.StatusNoContent), "%s", a)
			reference, _ := counter.state()

			problems := &faultProblems{}
			fired, applied := 0, 0
			for k := 1; k <= len(reference)+1; k++ {
				problems.at = fmt.Sprintf("k=%d", k)
				g := problems.gomega()
				name, id := stored(k)
				before := snapshot(Default, ctx, e.ns)
				fc := newFaultClient(fault, k)
				url, done := faultyFacade(fc, nil, faultInFlightTimeout)
				a := del(url, id)
				done()
				writes, failed := fc.state()
				problems.at = fmt.Sprintf("k=%d (failed: %q; writes: %v)", k, failed, writes)
				if failed == "" {
					g.Expect(a.status).To(Equal(http.StatusNoContent), "no write failed, so the request succeeds: %s", a)
					deleted(g, before, name)
					continue
				}
				fired++
				if a.status == http.StatusNoContent {
					// The write reached the API server and only its answer was lost: the request
					// saw the asset gone and said so. A repeat finds nothing to delete.
					applied++
					g.Expect(fault).To(Equal(faultTimeoutApplied), "a 204 for a delete that did not happen: %s", a)
					again := del(apiServer.URL, id)
					g.Expect(again.status).To(Equal(http.StatusNotFound), "the repeated delete: %s", again)
				} else {
					faultExpectErrorForm(g, a)
					g.Expect(fault).NotTo(Equal(faultTimeoutApplied), "an error for a delete that happened: %s", a)
					g.Expect(faultDiff(before, snapshot(Default, ctx, e.ns))).To(BeEmpty(), "a failed delete leaves the asset and all else")
					again := del(apiServer.URL, id)
					g.Expect(again.status).To(Equal(http.StatusNoContent), "the repeated delete: %s", again)
				}
				deleted(g, before, name)
			}
			GinkgoWriter.Printf("FIGURES delete-asset-fault %q: %d writes in a successful delete %v; %d k values, %d faults injected, "+
				"%d deletes applied despite the fault (204), %d problems\n",
				fault, len(reference), reference, len(reference)+1, fired, applied, len(problems.list))
			faultExpectFired(fired, len(reference))
			Expect(problems.list).To(BeEmpty())
		}, offboardFaults)
})

var _ = Describe("Reliability: write races on the API server", func() {
	var e faultEnv
	BeforeEach(func(ctx SpecContext) {
		o := newOrg(ctx)
		e = faultEnv{ns: o.Namespace, tok: o.token()}
	})

	DescribeTable("a lost race on one write is retried from fresh reads: 200 and the right state",
		func(ctx SpecContext, c faultCase, fault faultMode) {
			req := c.prepare(ctx, e, 1)
			fc := newFaultClient(fault, 0)
			url, done := faultyFacade(fc, nil, faultInFlightTimeout)
			a := req.send(url, e.tok)
			done()
			writes, failed := fc.state()
			Expect(failed).NotTo(BeEmpty(), "the fault was injected (writes: %v)", writes)
			Expect(a.status).To(Equal(http.StatusOK), "%s (injected on %q; writes %v)", a, failed, writes)
			req.check(ctx, Default, a.json(), false)
			GinkgoWriter.Printf("FIGURES race-fault %q %q: injected on %q, writes %v\n", c.name, fault, failed, writes)
		},
		faultEntry(caseOnboardExisting, faultConflict),
		faultEntry(caseInitialiseExisting, faultConflict),
		faultEntry(caseEnrolOverride, faultConflict),
		faultEntry(caseMeterConsent, faultConflict),
		faultEntry(caseDispatchConsent, faultConflict),
		faultEntry(caseDispatchDeconsent, faultConflict),
		faultEntry(caseUpdateAsset, faultConflict),
		faultEntry(caseUpdateSite, faultConflict),
		faultEntry(caseMoveSite, faultConflict),
		faultEntry(caseOnboardNew, faultAlreadyExists),
		faultEntry(caseInitialiseNew, faultAlreadyExists),
		faultEntry(caseLegacyNew, faultAlreadyExists),
		faultEntry(caseCreateAsset, faultAlreadyExists),
		faultEntry(caseCreateSite, faultAlreadyExists),
	)

	It("deletes an asset once when deletes of it race: one 204, the others 404", func(ctx SpecContext) {
		mpan := faultMPAN(1)
		mustCall("POST", "/entities/site/onboard", e.tok, household(mpan))
		faultSettled(ctx, e.ns, mpan, faultLP)
		id := entityStoredAsset(ctx, e.ns, "battery-"+mpan).Labels[flexv1.IDLabel]
		answers := relConcurrently(6, func(int) relAnswer {
			return relSend(relHTTP, http.MethodDelete, apiServer.URL, "/entities/asset/"+id, e.tok, nil)
		})
		Expect(relStatuses(answers)).To(Equal(map[int]int{http.StatusNoContent: 1, http.StatusNotFound: 5}), "%v", answers)
		Expect(relOfSite(ctx, Default, e.ns, identity.SiteNameForMPAN(mpan)).names()).To(HaveLen(3),
			"the site, its charger and its enrolment stay")
	})

	It("applies racing updates of one asset one at a time: each whole, none lost to a stale read", func(ctx SpecContext) {
		mpan := faultMPAN(2)
		mustCall("POST", "/entities/site/onboard", e.tok, household(mpan))
		faultSettled(ctx, e.ns, mpan, faultLP)
		battery := entityStoredAsset(ctx, e.ns, "battery-"+mpan)
		id := battery.Labels[flexv1.IDLabel]
		const n = 6
		// Request i sets power i+1 kW and capacity 10*(i+1) kWh: a stored pair from two
		// requests would show a lost update.
		answers := relConcurrently(n, func(i int) relAnswer {
			return relSend(relHTTP, http.MethodPatch, apiServer.URL, "/entities/asset/"+id, e.tok,
				map[string]any{"properties": map[string]any{"power_kw": i + 1, "capacity_kwh": 10 * (i + 1)}})
		})
		ok := 0
		for _, a := range answers {
			// Out of retries is the documented 503 (Retry-After); nothing else.
			Expect(a.status).To(BeElementOf(http.StatusOK, http.StatusServiceUnavailable), "%s", a)
			if a.status == http.StatusOK {
				ok++
				props := a.json()["properties"].(map[string]any)
				Expect(props["capacity_kwh"]).To(Equal(10 * props["power_kw"].(float64)))
			}
		}
		Expect(ok).To(BeNumerically(">=", 1))
		stored := &flexv1.Asset{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(battery), stored)).To(Succeed())
		Expect(*stored.Spec.CapacityWh).To(Equal(10 * *stored.Spec.PowerW))
		GinkgoWriter.Printf("FIGURES patch-race: %d concurrent PATCHes of one asset: %v\n", n, relStatuses(answers))
	})
})

var _ = Describe("Reliability: injected read faults", func() {
	var e faultEnv
	BeforeEach(func(ctx SpecContext) {
		o := newOrg(ctx)
		e = faultEnv{ns: o.Namespace, tok: o.token()}
	})

	// For k = 1 .. (reads of a successful request), the k-th read (cache or API reader) times
	// out: the answer is the documented error form and nothing stored changes; a 200 is right
	// only when the failed read came after the request's last write (its read-your-writes wait
	// gives up on a failed read rather than fail a request that is done).
	DescribeTable("the k-th read times out: the documented error and nothing written, for every k",
		func(ctx SpecContext, c faultCase) {
			req := c.prepare(ctx, e, 0)
			counter := newFaultClient(faultServerError, 0)
			reads := &faultReads{writes: counter}
			url, done := faultyFacade(counter, reads, faultInFlightTimeout)
			a := req.send(url, e.tok)
			done()
			Expect(a.status).To(Equal(http.StatusOK), "%s", a)
			req.check(ctx, Default, a.json(), false)
			total, _, _ := reads.state()
			GinkgoWriter.Printf("reference reads: %v\n", reads.reads)
			refWrites, _ := counter.state()

			problems := &faultProblems{}
			errorsAnswered, okAfterWrites, notFired := 0, 0, 0
			for k := 1; k <= total; k++ {
				problems.at = fmt.Sprintf("k=%d", k)
				g := problems.gomega()
				req := c.prepare(ctx, e, k)
				before := snapshot(Default, ctx, e.ns)
				fc := newFaultClient(faultServerError, 0)
				reads := &faultReads{failAt: k, writes: fc}
				url, done := faultyFacade(fc, reads, faultInFlightTimeout)
				a := req.send(url, e.tok)
				done()
				_, failed, writesAtFire := reads.state()
				writes, _ := fc.state()
				problems.at = fmt.Sprintf("k=%d (failed read %q after %d writes; writes %v)", k, failed, writesAtFire, writes)
				GinkgoWriter.Printf("read fault %s: answer %d\n", problems.at, a.status)
				switch {
				case failed == "":
					notFired++
					g.Expect(a.status).To(Equal(http.StatusOK), "no read failed, so the request succeeds: %s", a)
					req.check(ctx, g, a.json(), false)
				case a.status == http.StatusOK && writesAtFire == len(writes) && len(writes) > 0:
					okAfterWrites++
					req.check(ctx, g, a.json(), false)
				default:
					errorsAnswered++
					faultExpectErrorForm(g, a)
					faultSoon(g, func() []string { return faultDiff(before, snapshot(Default, ctx, e.ns)) }).
						Should(BeEmpty(), "a failed request leaves no stored change (- lost, + left behind)")
				}
			}
			GinkgoWriter.Printf("FIGURES read-fault %q: %d reads and %d writes in a successful request; %d reads failed in turn: "+
				"%d error answers, %d 200s (read after the last write), %d k beyond this run's reads, %d problems\n",
				c.name, total, len(refWrites), total, errorsAnswered, okAfterWrites, notFired, len(problems.list))
			faultExpectFired(total-notFired, total)
			Expect(problems.list).To(BeEmpty())
		},
		Entry(caseOnboardNew.name, caseOnboardNew),
		Entry(caseOnboardExisting.name, caseOnboardExisting),
		Entry(caseInitialiseNew.name, caseInitialiseNew),
		Entry(caseLegacyNew.name, caseLegacyNew),
		Entry(caseCreateAsset.name, caseCreateAsset),
		Entry(caseDispatchConsent.name, caseDispatchConsent),
		Entry(caseDispatchDeconsent.name, caseDispatchDeconsent),
		Entry(caseUpdateAsset.name, caseUpdateAsset),
		Entry(caseUpdateSite.name, caseUpdateSite),
		Entry(caseMeterConsent.name, caseMeterConsent),
		Entry(caseMoveSite.name, caseMoveSite),
		Entry(caseCreateSite.name, caseCreateSite),
	)
})

// DELETE /entities/site/{site_id} under faults. It makes one write that matters (the site's
// delete; any children that slipped in go after it, and the Site finalizer deletes them too),
// so there is no partial state to leave: after a failed delete the site is as it was, or (the
// delete applied, the answer lost) gone with everything it had, and a repeat answers 204 or 404.
var _ = Describe("Reliability: DELETE /entities/site/{site_id} under injected faults", func() {
	var e faultEnv
	BeforeEach(func(ctx SpecContext) {
		o := newOrg(ctx)
		e = faultEnv{ns: o.Namespace, tok: o.token()}
	})
	path := func(id string) string { return "/entities/site/" + id }
	// deleteOutcome checks the state after a DELETE through a faulty instance that answered a,
	// and repeats the request through the normal REST API.
	deleteOutcome := func(ctx context.Context, g Gomega, a relAnswer, failed string, applied bool, name, id, before string) {
		if failed == "" {
			g.Expect(a.status).To(Equal(http.StatusNoContent), "no fault fired, so the delete succeeds: %s", a)
		} else {
			faultExpectErrorForm(g, a)
			if !applied {
				g.Expect(faultDiff(before, snapshot(Default, ctx, e.ns))).To(BeEmpty(), "a refused delete changes nothing")
			}
			again := lcSend(apiServer.URL, "DELETE", path(id), e.tok, nil)
			want := http.StatusNoContent
			if applied {
				want = http.StatusNotFound // the site is on its way out: to the API it is gone
			}
			g.Expect(again.status).To(Equal(want), "the repeated delete: %s", again)
		}
		faultSoon(g, func(g Gomega) []string { return relOfSite(ctx, g, e.ns, name).names() }).
			Should(BeEmpty(), "the site and whatever it had are gone")
	}

	DescribeTable("the k-th write fails",
		func(ctx SpecContext, fault faultMode) {
			name, id := lcBareSite(ctx, e.tok, e.ns, faultMPAN(0))
			counter := newFaultClient(fault, 0)
			url, done := faultyFacade(counter, nil, faultInFlightTimeout)
			a := lcSend(url, "DELETE", path(id), e.tok, nil)
			done()
			Expect(a.status).To(Equal(http.StatusNoContent), "%s", a)
			lcGone(ctx, e.ns, name)
			reference, _ := counter.state()
			Expect(reference).To(Equal([]string{"Delete Site/" + name}))

			problems := &faultProblems{}
			fired := 0
			for k := 1; k <= len(reference)+1; k++ {
				problems.at = fmt.Sprintf("k=%d", k)
				g := problems.gomega()
				name, id := lcBareSite(ctx, e.tok, e.ns, faultMPAN(k))
				before := snapshot(Default, ctx, e.ns)
				fc := newFaultClient(fault, k)
				url, done := faultyFacade(fc, nil, faultInFlightTimeout)
				a := lcSend(url, "DELETE", path(id), e.tok, nil)
				done()
				writes, failed := fc.state()
				problems.at = fmt.Sprintf("k=%d (failed: %q; writes: %v)", k, failed, writes)
				if failed != "" {
					fired++
				}
				deleteOutcome(ctx, g, a, failed, failed != "" && fault == faultTimeoutApplied, name, id, before)
			}
			GinkgoWriter.Printf("FIGURES delete-site write-fault %q: writes %v; %d k values, %d faults injected, %d problems\n",
				fault, reference, len(reference)+1, fired, len(problems.list))
			faultExpectFired(fired, len(reference))
			Expect(problems.list).To(BeEmpty())
		},
		Entry(faultServerError.String(), faultServerError),
		Entry(faultTimeout.String(), faultTimeout),
		Entry(faultTimeoutApplied.String(), faultTimeoutApplied),
	)

	It("the k-th read times out: before the delete, an error and nothing changed; after it, 204", func(ctx SpecContext) {
		name, id := lcBareSite(ctx, e.tok, e.ns, faultMPAN(0))
		counter := newFaultClient(faultServerError, 0)
		reads := &faultReads{writes: counter}
		url, done := faultyFacade(counter, reads, faultInFlightTimeout)
		a := lcSend(url, "DELETE", path(id), e.tok, nil)
		done()
		Expect(a.status).To(Equal(http.StatusNoContent), "%s", a)
		lcGone(ctx, e.ns, name)
		total, _, _ := reads.state()
		GinkgoWriter.Printf("reference reads: %v\n", reads.reads)

		problems := &faultProblems{}
		errorsAnswered, okAfterWrite, fired := 0, 0, 0
		for k := 1; k <= total; k++ {
			problems.at = fmt.Sprintf("k=%d", k)
			g := problems.gomega()
			name, id := lcBareSite(ctx, e.tok, e.ns, faultMPAN(k))
			before := snapshot(Default, ctx, e.ns)
			fc := newFaultClient(faultServerError, 0)
			reads := &faultReads{failAt: k, writes: fc}
			url, done := faultyFacade(fc, reads, faultInFlightTimeout)
			a := lcSend(url, "DELETE", path(id), e.tok, nil)
			done()
			_, failed, writesAtFire := reads.state()
			problems.at = fmt.Sprintf("k=%d (failed read %q after %d writes)", k, failed, writesAtFire)
			if failed != "" {
				fired++
			}
			switch {
			case failed != "" && writesAtFire == 0:
				errorsAnswered++
				deleteOutcome(ctx, g, a, failed, false, name, id, before)
			default: // no read failed, or one after the delete: the site is deleted, and says so
				okAfterWrite++
				deleteOutcome(ctx, g, a, "", true, name, id, before)
			}
		}
		GinkgoWriter.Printf("FIGURES delete-site read-fault: %d reads in a successful delete; %d error answers, %d 204s "+
			"(read after the delete), %d problems\n", total, errorsAnswered, okAfterWrite, len(problems.list))
		faultExpectFired(fired, total)
		Expect(problems.list).To(BeEmpty())
	})
})

var _ = Describe("Reliability: crash mid-onboard", func() {
	const inFlight = 3 * time.Second
	var e faultEnv
	BeforeEach(func(ctx SpecContext) {
		o := newOrg(ctx)
		e = faultEnv{ns: o.Namespace, tok: o.token()}
	})
	// One connection per request, so the broken one is never reused or retried by the transport.
	crashHTTP := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}

	// crash sends a new household's onboard to an instance whose k-th write kills the request.
	crash := func(k int, mpan string) (writes []string) {
		GinkgoHelper()
		fc := newFaultClient(faultCrash, k)
		url, done := faultyFacade(fc, nil, inFlight)
		defer done()
		a := relPost(crashHTTP, url, "/entities/site/onboard", e.tok, household(mpan))
		writes, failed := fc.state()
		Expect(failed).NotTo(BeEmpty(), "the crash happened")
		Expect(a.err).To(HaveOccurred(), "a dead request answers nothing: %s", a)
		return writes
	}
	abandonedEvents := func(ctx context.Context, g Gomega, siteName string) int {
		events := &eventsv1.EventList{}
		g.Expect(k8sClient.List(ctx, events, client.InNamespace(e.ns))).To(Succeed())
		n := 0
		for _, ev := range events.Items {
			if ev.Reason == "AbandonedOnboard" && ev.Regarding.Name == siteName {
				n++
			}
		}
		return n
	}
	retry := func(ctx context.Context, mpan string) map[string]any {
		GinkgoHelper()
		answer := mustCall("POST", "/entities/site/onboard", e.tok, household(mpan))
		faultExpectHousehold(ctx, Default, e.ns, mpan, faultSiteID(answer), []string{"charger-" + mpan, "battery-" + mpan}, faultLP)
		faultSettled(ctx, e.ns, mpan, faultLP)
		return answer
	}

	DescribeTable("a request that dies after writing the site: the Site controller removes the half-written site; the retry succeeds",
		func(ctx SpecContext, k int) {
			mpan := validMPAN(6000 + k)
			siteName := identity.SiteNameForMPAN(mpan)
			writes := crash(k, mpan)

			By("leaving the half-written site for now, marked in flight")
			site := &flexv1.Site{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: siteName}, site)).To(Succeed())
			Expect(site.Annotations).To(HaveKey(flexv1.InFlightAnnotation))
			Expect(relOfSite(ctx, Default, e.ns, siteName).names()).To(HaveLen(k - 1))

			By("deleting it and its children once the deadline passes, with an AbandonedOnboard event")
			crashed := time.Now()
			Eventually(func(g Gomega) []string { return relOfSite(ctx, g, e.ns, siteName).names() }).
				WithTimeout(20 * time.Second).Should(BeEmpty())
			removedAfter := time.Since(crashed)
			Eventually(func(g Gomega) int { return abandonedEvents(ctx, g, siteName) }).Should(Equal(1))

			By("letting the client's retry onboard the household completely")
			answer := retry(ctx, mpan)
			Expect(answer["site"].(map[string]any)["site_created"]).To(BeTrue())
			Expect(answer["enrolment"].(map[string]any)["status"]).To(Equal("enrolled"))
			GinkgoWriter.Printf("FIGURES crash k=%d: writes before the crash %v; half-written site removed %.1fs after the crash\n",
				k, writes[:k-1], removedAfter.Seconds())
		},
		Entry("after the site, before the assets (k=2)", 2),
		Entry("after the site and the first asset (k=3)", 3),
		Entry("after the site and both assets, before the enrolment (k=4)", 4),
	)

	It("leaves nothing when the request dies on its first write (k=1)", func(ctx SpecContext) {
		before := snapshot(Default, ctx, e.ns)
		crash(1, validMPAN(6001))
		Consistently(func(g Gomega) string { return snapshot(g, ctx, e.ns) }, inFlight+2*time.Second).Should(Equal(before))
	})

	DescribeTable("a retry sent straight after the crash completes the household, and the site is not deleted at the deadline",
		func(ctx SpecContext, k int) {
			mpan := validMPAN(6100 + k)
			siteName := identity.SiteNameForMPAN(mpan)
			crash(k, mpan)
			crashedSite := &flexv1.Site{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: siteName}, crashedSite)).To(Succeed())

			answer := retry(ctx, mpan)
			Expect(answer["site"].(map[string]any)["site_id"]).To(Equal(crashedSite.Labels[flexv1.IDLabel]),
				"the retry completes the site the dead request created")
			By("the Site controller evaluating the completed site")
			site := &flexv1.Site{}
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: siteName}, site)).To(Succeed())
				g.Expect(meta.IsStatusConditionTrue(site.Status.Conditions, flexv1.ReadyCondition)).To(BeTrue())
			}).Should(Succeed())

			By("keeping the site past the dead request's deadline")
			want := relOfSite(ctx, Default, e.ns, siteName).names()
			Expect(want).To(HaveLen(4))
			Consistently(func(g Gomega) {
				current := &flexv1.Site{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: siteName}, current)).To(Succeed())
				g.Expect(current.UID).To(Equal(crashedSite.UID))
				g.Expect(current.DeletionTimestamp.IsZero()).To(BeTrue())
				g.Expect(relOfSite(ctx, g, e.ns, siteName).names()).To(Equal(want))
			}, inFlight+3*time.Second, 250*time.Millisecond).Should(Succeed())
			Expect(abandonedEvents(ctx, Default, siteName)).To(BeZero())
			GinkgoWriter.Printf("FIGURES crash-then-immediate-retry k=%d: site kept and evaluated\n", k)
		},
		Entry("crash after the site (k=2)", 2),
		Entry("crash after the site and the first asset (k=3)", 3),
		Entry("crash after the site and both assets (k=4)", 4),
	)
})

package argocd_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/testenv"
)

// The Argo CD health checks of config/argocd/argocd-cm-patch.yaml (what users merge into
// argocd-cm), run the way Argo CD runs them (gopher-lua, only the base, package and table
// libraries, the object as the global obj) against Sites, Assets and Enrolments exactly as the
// API server returns them while the real controllers work on them (envtest). Each verdict is
// also compared with kstatus's (Healthy is Current, Progressing InProgress, Degraded Failed),
// the reading the controllers' conditions are designed for.

var (
	env     *testenv.Env
	scripts map[string]string // argocd-cm key -> Lua
)

const (
	healthy     = "Healthy"
	progressing = "Progressing"
	degraded    = "Degraded"
)

func TestArgoCDHealth(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Argo CD health checks suite (gopher-lua against envtest + controllers)")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "argocd", "argocd-cm-patch.yaml"))
	Expect(err).NotTo(HaveOccurred())
	var cm corev1.ConfigMap
	Expect(yaml.UnmarshalStrict(data, &cm)).To(Succeed())
	Expect(cm.Name).To(Equal("argocd-cm"))
	scripts = cm.Data

	suiteCtx, cancel := context.WithCancel(context.Background())
	env, err = testenv.Start(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	DeferCleanup(cancel) // runs first: the manager stops before the API server
	testDB, err := dbtest.ForSuite(ctx, Fail, Skip)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { testDB.Close(ctx) })
	mgr, err := env.NewManager()
	Expect(err).NotTo(HaveOccurred())
	Expect(controllers.SetupWithManager(suiteCtx, mgr, controllers.Options{DB: testDB.Pool})).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(suiteCtx)).To(Succeed())
	}()

	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
}, NodeTimeout(2*time.Minute))

// verdict is an Argo CD health status and message.
type verdict struct{ Status, Message string }

// argoHealth runs the object's health check as Argo CD does: the script keyed by the object's
// group and kind, in a Lua state without the standard libraries but base, package and table
// (Argo CD opens the rest only for resource.customizations.useOpenLibs), with the object,
// decoded from JSON as Argo CD's live objects are, as the global obj.
func argoHealth(obj client.Object) verdict {
	gvk, err := apiutil.GVKForObject(obj, testenv.Scheme)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	script, ok := scripts["resource.customizations.health."+gvk.Group+"_"+gvk.Kind]
	ExpectWithOffset(1, ok).To(BeTrue(), "no health check for %s", gvk)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())

	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{
		lua.LoadLibName: lua.OpenPackage, lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable} {
		ExpectWithOffset(1, l.CallByParam(lua.P{Fn: l.NewFunction(open), Protect: true}, lua.LString(name))).To(Succeed())
	}
	runCtx, cancel := context.WithTimeout(context.Background(), time.Second) // Argo CD's limit
	defer cancel()
	l.SetContext(runCtx)
	l.SetGlobal("obj", toLua(l, content))
	ExpectWithOffset(1, l.DoString(script)).To(Succeed())
	result, ok := l.Get(-1).(*lua.LTable)
	ExpectWithOffset(1, ok).To(BeTrue(), "the script must return a table")
	return verdict{Status: lua.LVAsString(result.RawGetString("status")), Message: lua.LVAsString(result.RawGetString("message"))}
}

// toLua converts a decoded JSON value to Lua: objects and arrays to tables, numbers (int64 in
// unstructured content) to Lua numbers.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for k, item := range v {
			t.RawSetString(k, toLua(l, item))
		}
		return t
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	case nil:
		return lua.LNil
	}
	Fail("unexpected JSON value")
	return lua.LNil
}

// kstatusAgreement is the kstatus status each Argo CD health status stands for.
var kstatusAgreement = map[string]status.Status{
	healthy: status.CurrentStatus, progressing: status.InProgressStatus, degraded: status.FailedStatus}

// healthOf checks obj as it stands (as the API server last returned it): Argo CD's verdict,
// which must agree with kstatus's.
func healthOf(obj client.Object) verdict {
	v := argoHealth(obj)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	ks, err := status.Compute(&unstructured.Unstructured{Object: content})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	ExpectWithOffset(1, ks.Status).To(Equal(kstatusAgreement[v.Status]),
		"Argo CD says %s (%s), kstatus %s (%s)", v.Status, v.Message, ks.Status, ks.Message)
	return v
}

// healthNow reads obj afresh and checks it, for Eventually.
func healthNow(ctx context.Context, obj client.Object) func(Gomega) verdict {
	return func(g Gomega) verdict {
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		return healthOf(obj)
	}
}

func haveHealth(st string, message ...string) OmegaMatcher {
	m := make([]OmegaMatcher, 0, 1+len(message))
	m = append(m, HaveField("Status", st))
	for _, s := range message {
		m = append(m, HaveField("Message", ContainSubstring(s)))
	}
	return And(m...)
}

func newSite(ns, mpan string) *flexv1.Site {
	return &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.SiteNameForMPAN(mpan)},
		Spec: flexv1.SiteSpec{MPAN: mpan, Postcode: "SW1A 1AA"}}
}

// newAsset is a charger; qualified makes it a known CoP11 model with an installation date.
func newAsset(ns, siteName, externalID string, qualified bool) *flexv1.Asset {
	a := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.AssetName(externalID)},
		Spec: flexv1.AssetSpec{SiteName: siteName, ExternalID: externalID, Type: flexv1.AssetTypeCharger,
			PowerW: ptr.To[int64](7400)}}
	if qualified {
		a.Spec.Model, a.Spec.InstallationDate = "zappi", "2025-06-15"
	}
	return a
}

func newEnrolment(ns, siteName string) *flexv1.Enrolment {
	p := flexv1.PropositionLimitedPause
	return &flexv1.Enrolment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.EnrolmentName(siteName, p)},
		Spec: flexv1.EnrolmentSpec{SiteName: siteName, Proposition: p}}
}

var _ = Describe("Argo CD health checks (config/argocd)", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		var err error
		ns, err = env.Namespace(ctx)
		Expect(err).NotTo(HaveOccurred())
	})

	It("report an eligible, enrolled household Progressing until observed, then Healthy", func(ctx SpecContext) {
		site := newSite(ns, "1200000000011")
		objs := []client.Object{site, newAsset(ns, site.Name, "argo-charger", true), newEnrolment(ns, site.Name)}
		for _, obj := range objs {
			Expect(env.Client.Create(ctx, obj)).To(Succeed())
			// The API server's answer to the create: status.observedGeneration -1 (a default).
			Expect(healthOf(obj)).To(haveHealth(progressing, "Waiting for the controller to observe generation 1"), "%T", obj)
		}
		for _, obj := range objs {
			Eventually(healthNow(ctx, obj)).Should(haveHealth(healthy), "%T", obj)
		}
		Expect(healthOf(objs[2])).To(haveHealth(healthy, "is enrolled in limited_pause"))

		By("a spec change is Progressing until the controller has observed it")
		Eventually(func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(site), site); err != nil {
				return err
			}
			site.Spec.StreetAddress = "1 New Street"
			return env.Client.Update(ctx, site)
		}).Should(Succeed())
		Expect(healthOf(site)).To(haveHealth(progressing, "generation 2"))
		Eventually(healthNow(ctx, site)).Should(haveHealth(healthy))
	})

	It("report an enrolment that cannot become active Degraded, with the Stalled condition's message", func(ctx SpecContext) {
		site := newSite(ns, "2301234567894")
		enrolment := newEnrolment(ns, site.Name)
		for _, obj := range []client.Object{site, newAsset(ns, site.Name, "argo-no-model", false), enrolment} {
			Expect(env.Client.Create(ctx, obj)).To(Succeed())
		}
		Eventually(healthNow(ctx, enrolment)).Should(haveHealth(degraded, "The site is not eligible for limited_pause"))
		stalled := meta.FindStatusCondition(enrolment.Status.Conditions, flexv1.StalledCondition)
		Expect(stalled).NotTo(BeNil())
		Expect(healthOf(enrolment).Message).To(Equal(stalled.Message))
		By("the site itself is Healthy: qualifying for nothing is its domain state, not a failure")
		Eventually(healthNow(ctx, site)).Should(haveHealth(healthy))
	})

	It("report an enrolment waiting for its site Progressing (Reconciling), then Healthy once the site comes", func(ctx SpecContext) {
		site := newSite(ns, "1012345678903")
		enrolment := newEnrolment(ns, site.Name)
		Expect(env.Client.Create(ctx, enrolment)).To(Succeed())
		Eventually(healthNow(ctx, enrolment)).Should(haveHealth(progressing, "does not exist (yet)"))
		reconciling := meta.FindStatusCondition(enrolment.Status.Conditions, flexv1.ReconcilingCondition)
		Expect(reconciling).NotTo(BeNil())
		Expect(reconciling.Status).To(Equal(metav1.ConditionTrue))

		Expect(env.Client.Create(ctx, site)).To(Succeed())
		Expect(env.Client.Create(ctx, newAsset(ns, site.Name, "argo-late", true))).To(Succeed())
		Eventually(healthNow(ctx, enrolment)).Should(haveHealth(healthy))
	})

	It("report an asset whose site does not exist Degraded", func(ctx SpecContext) {
		orphan := newAsset(ns, "mpan-1200000000011", "argo-orphan", true)
		Expect(env.Client.Create(ctx, orphan)).To(Succeed())
		Eventually(healthNow(ctx, orphan)).Should(haveHealth(degraded, `Site "mpan-1200000000011" does not exist`))
	})

	It("set the same script for the three kinds, and only for them", func() {
		Expect(scripts).To(HaveLen(3))
		Expect(scripts).To(HaveKey("resource.customizations.health.flexsite.io_Site"))
		Expect(scripts).To(HaveKey("resource.customizations.health.flexsite.io_Asset"))
		Expect(scripts).To(HaveKey("resource.customizations.health.flexsite.io_Enrolment"))
		lua, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "argocd", "health.lua"))
		Expect(err).NotTo(HaveOccurred())
		for key, script := range scripts {
			Expect(strings.TrimSpace(script)).To(Equal(strings.TrimSpace(string(lua))), "%s (run make chart)", key)
		}
	})
})

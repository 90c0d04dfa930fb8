package admission_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/testenv"
)

// The API-server requests each webhook makes are counted by verb: the suite's webhook server
// tags every admission request's context with its path (taggingServer), and the manager's
// transport (countAdmissionCalls) counts the requests made with a tagged context. A webhook
// runs on every write of its kind, so it may not LIST: the API server answers a LIST of a
// namespace (a selector included) by going through every object of it (docs/scale.md,
// "Request paths: no LIST").

type admissionPath struct{}

var admissionCalls sync.Map // webhook path + " " + verb -> *atomic.Int64

// taggingServer is the manager's webhook server, with each webhook's requests tagged.
type taggingServer struct{ webhook.Server }

func (s taggingServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hook.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), admissionPath{}, path)))
	}))
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func countAdmissionCalls(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if path, ok := r.Context().Value(admissionPath{}).(string); ok {
			n, _ := admissionCalls.LoadOrStore(path+" "+testenv.APIVerb(r), new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
		}
		return next.RoundTrip(r)
	})
}

// admissionCounts is the webhook's count of each verb so far.
func admissionCounts(path string) map[string]int64 {
	out := map[string]int64{}
	admissionCalls.Range(func(k, v any) bool {
		if verb, ok := strings.CutPrefix(k.(string), path+" "); ok {
			out[verb] = v.(*atomic.Int64).Load()
		}
		return true
	})
	return out
}

// since names the requests counted since before ("get=1 list=0"), each verb of either.
func since(before, after map[string]int64) (string, map[string]int64) {
	diff := map[string]int64{}
	var parts []string
	for verb, n := range after {
		if d := n - before[verb]; d > 0 {
			diff[verb] = d
			parts = append(parts, fmt.Sprintf("%s=%d", verb, d))
		}
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "none", diff
	}
	return strings.Join(parts, " "), diff
}

var _ = Describe("Webhooks issue no LIST", func() {
	It("creates an Enrolment of an evaluated household with its assets with no LIST from the Enrolment webhook", func(ctx SpecContext) {
		ns, err := env.Namespace(ctx)
		Expect(err).NotTo(HaveOccurred())
		// A few households, so that the namespace is not empty, then the one enrolled: its
		// status current (evaluated), which is when the webhook reads the site's assets.
		for i, mpan := range []string{"1200000000011", "1234567890126", "1300000000016"} {
			Expect(k8sClient.Create(ctx, site(ns, fmt.Sprintf("home-%d", i), mpan))).To(Succeed())
			Expect(k8sClient.Create(ctx, asset(ns, fmt.Sprintf("home-%d", i), fmt.Sprintf("charger-%d", i)))).To(Succeed())
		}
		Eventually(func(g Gomega) {
			s := &flexv1.Site{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "home-0"}, s)).To(Succeed())
			_, current := household.EvaluatedEligibility(s)
			g.Expect(current).To(BeTrue())
			g.Expect(s.Status.Assets).To(HaveLen(1))
		}).Should(Succeed())

		path := "/validate-flexsite-io-v1alpha1-enrolment"
		before := admissionCounts(path)
		Expect(k8sClient.Create(ctx, enrolment(ns, "home-0"))).To(Succeed())
		// An enrolment of a site that does not exist yet, and of one not evaluated yet.
		Expect(k8sClient.Create(ctx, enrolment(ns, "later"))).To(Succeed())
		Expect(k8sClient.Create(ctx, site(ns, "new", "1012345678903"))).To(Succeed())
		Expect(k8sClient.Create(ctx, enrolment(ns, "new"))).To(Succeed())
		counts, diff := since(before, admissionCounts(path))
		GinkgoWriter.Printf("FIGURES API-server requests by verb, Enrolment webhook, 3 enrolments: %s\n", counts)
		Expect(diff).NotTo(HaveKey("list"), "the Enrolment webhook LISTed (%s)", counts)
		Expect(diff["get"]).To(BeNumerically(">=", 1), "the site is read by GET (%s)", counts)
	})
})

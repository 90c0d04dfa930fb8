package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/rewardstore"
	"github.com/flexsite/flexsite/internal/shards"
	"github.com/flexsite/flexsite/internal/testenv"
)

// Every write the manager (controllers and REST API alike) makes to the API server is
// recorded by namespace (countAPICalls), whatever context it was made in: what a household
// costs in writes is counted from its onboard until its controllers are done.

// apiWrite is one create, update or patch the manager sent.
type apiWrite struct {
	Verb, Resource, Subresource, Name string
	// Body is a patch's body (what it changed).
	Body string
}

func (w apiWrite) String() string {
	res := w.Resource
	if w.Subresource != "" {
		res += "/" + w.Subresource
	}
	return fmt.Sprintf("%s %s %s", w.Verb, res, w.Name)
}

var (
	writesMu sync.Mutex
	writesIn = map[string][]apiWrite{} // namespace -> writes, in order
)

// writesOf is every write the manager has made in namespace ns so far.
func writesOf(ns string) []apiWrite {
	writesMu.Lock()
	defer writesMu.Unlock()
	return append([]apiWrite(nil), writesIn[ns]...)
}

// recordWrite notes r if it is a write to a namespaced object.
func recordWrite(r *http.Request) {
	verb := testenv.APIVerb(r)
	if verb != "create" && verb != "update" && verb != "patch" {
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	}
	if len(parts) < 3 || parts[0] != "namespaces" {
		return
	}
	w := apiWrite{Verb: verb, Resource: parts[2]}
	if len(parts) > 3 {
		w.Name = parts[3]
	}
	if len(parts) > 4 {
		w.Subresource = parts[4]
	}
	if verb == "patch" && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err == nil {
			w.Body = string(body)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	writesMu.Lock()
	defer writesMu.Unlock()
	writesIn[parts[1]] = append(writesIn[parts[1]], w)
}

// ofHousehold keeps the writes to a household's kinds (Sites and the objects they control).
func ofHousehold(writes []apiWrite) []apiWrite {
	var kept []apiWrite
	for _, w := range writes {
		switch w.Resource {
		case "sites", "assets", "enrolments", "rewardledgers", "deviceconnections", "mpanclaims":
			kept = append(kept, w)
		}
	}
	return kept
}

// storedBytes is what the objects of kind in ns hold as the API server stores them: the JSON
// of each with its managed fields (as the bench's etcd figure measures it), and how many.
func storedBytes(ctx SpecContext, ns, kind string) (int, int) {
	GinkgoHelper()
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(flexv1.GroupVersion.WithKind(kind + "List"))
	Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	total := 0
	for i := range list.Items {
		data, err := json.Marshal(list.Items[i].Object)
		Expect(err).NotTo(HaveOccurred())
		total += len(data)
	}
	return total, len(list.Items)
}

var _ = Describe("Writes and etcd bytes per household", func() {
	It("onboards a household in at most 8 writes, children created with their Site as controller, in at most 10 KB of etcd", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		const mpan = "1200000000011"
		mustCall("POST", "/entities/site/onboard", tok, household(mpan))
		siteKey := client.ObjectKey{Namespace: o.Namespace, Name: identity.SiteNameForMPAN(mpan)}
		enrolmentKey := client.ObjectKey{Namespace: o.Namespace, Name: identity.EnrolmentName(siteKey.Name, flexv1.PropositionLimitedPause)}

		// Converged: the site's status is of its spec and Ready, the enrolment Active.
		site := &flexv1.Site{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, siteKey, site)).To(Succeed())
			ready := meta.FindStatusCondition(site.Status.Conditions, flexv1.ReadyCondition)
			g.Expect(site.Status.ObservedGeneration).To(Equal(site.Generation))
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
			enrolment := &flexv1.Enrolment{}
			g.Expect(k8sClient.Get(ctx, enrolmentKey, enrolment)).To(Succeed())
			g.Expect(enrolment.Status.Phase).To(Equal(flexv1.EnrolmentActive))
			g.Expect(enrolment.Status.ObservedGeneration).To(Equal(enrolment.Generation))
		}).Should(Succeed())
		// Counted once converged: each controller patches its status after the adoption its
		// reconcile would have made, so a child patched for its controller is among these.

		writes := ofHousehold(writesOf(o.Namespace))
		Expect(len(writes)).To(BeNumerically("<=", 8), "writes per REST onboard: %v", writes)
		for _, w := range writes {
			Expect(w.Body).NotTo(ContainSubstring("ownerReferences"), "a child patched for its controller: %s %s", w, w.Body)
		}

		// Each child was created with its Site as controller.
		children := []client.Object{
			&flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: identity.AssetName("charger-" + mpan)}},
			&flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: identity.AssetName("battery-" + mpan)}},
			&flexv1.Enrolment{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: enrolmentKey.Name}},
		}
		for _, child := range children {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(child), child)).To(Succeed())
			owner := metav1.GetControllerOf(child)
			Expect(owner).NotTo(BeNil(), "%T %s has no controller", child, child.GetName())
			Expect(owner.Kind).To(Equal("Site"))
			Expect(owner.UID).To(Equal(site.UID))
		}

		// What the household stores, as the bench's etcd figure measures it: with a year of
		// weekly rewards (its RewardLedger made and summarised by its controller).
		needDatabase()
		store := &rewardstore.Store{Pool: testDB.Pool}
		start := time.Date(2025, 1, 6, 0, 0, 0, 0, time.UTC)
		txs := make([]flexv1.RewardTransaction, 52)
		for i := range txs {
			from := start.AddDate(0, 0, 7*i)
			to := from.AddDate(0, 0, 7)
			txs[i] = flexv1.RewardTransaction{ID: identity.NewID(), Type: "flex period", CreditPence: int64(20 + (i*37)%180),
				StartTime: &metav1.Time{Time: from}, EndTime: &metav1.Time{Time: to},
				SettlementDate: to.AddDate(0, 0, 5).Format(time.DateOnly), FlexWh: ptr.To(int64(1500 + 10*i))}
		}
		Expect(store.AppendMany(ctx, rewardstore.Site{Namespace: o.Namespace, ID: site.Labels[flexv1.IDLabel]}, txs,
			rewardstore.SourceAPI)).To(Succeed())
		Eventually(func(g Gomega) {
			ledger := &flexv1.RewardLedger{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.RewardLedgerName(site.Name)}, ledger)).
				To(Succeed())
			g.Expect(ledger.Status.RecentTransactions).NotTo(BeEmpty())
			g.Expect(ledger.Status.ObservedGeneration).To(Equal(ledger.Generation))
			g.Expect(metav1.GetControllerOf(ledger)).NotTo(BeNil())
		}).Should(Succeed())
		total := 0
		kinds := []string{"Site", "Asset", "Enrolment", "RewardLedger", "MPANClaim"}
		parts := make([]string, 0, len(kinds))
		for _, kind := range kinds {
			bytes, n := storedBytes(ctx, o.Namespace, kind)
			total += bytes
			parts = append(parts, fmt.Sprintf("%s %d (%d)", kind, bytes, n))
		}
		AddReportEntry("etcd bytes per household", fmt.Sprintf("%d: %s", total, strings.Join(parts, ", ")))
		// No sharder runs in this suite: the label its webhook adds to each of the ring's
		// objects (the Site, its Assets, Enrolment and RewardLedger) is counted in, with a
		// shard named as a replica's pod is.
		shardLabel := len(`,"` + shards.ShardLabel + `":"flexsite-manager-5d9c7b8f6d-x2x7q"`)
		Expect(total+5*shardLabel).To(BeNumerically("<=", 10*1024), "%s", strings.Join(parts, ", "))
	})

	It("adopts a child written without a controller (as kubectl writes it), and no other", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		const mpan = "2301234567894"
		mustCall("POST", "/entities/site/onboard", tok, household(mpan))
		siteKey := client.ObjectKey{Namespace: o.Namespace, Name: identity.SiteNameForMPAN(mpan)}
		site := &flexv1.Site{}
		Expect(k8sClient.Get(ctx, siteKey, site)).To(Succeed())
		declared := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: identity.AssetName("declared-" + mpan)},
			Spec: flexv1.AssetSpec{SiteName: siteKey.Name, ExternalID: "declared-" + mpan, Type: flexv1.AssetTypeBattery}}
		Expect(k8sClient.Create(ctx, declared)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(declared), declared)).To(Succeed())
			owner := metav1.GetControllerOf(declared)
			g.Expect(owner).NotTo(BeNil())
			g.Expect(owner.UID).To(Equal(site.UID))
		}).Should(Succeed())
		var adoptions []apiWrite
		for _, w := range writesOf(o.Namespace) {
			if strings.Contains(w.Body, "ownerReferences") {
				adoptions = append(adoptions, w)
			}
		}
		// The declared asset alone is patched for it (again after a conflict with its status write).
		Expect(adoptions).NotTo(BeEmpty())
		for _, w := range adoptions {
			Expect(w.Name).To(Equal(declared.Name), "adopted: %s", w)
		}
	})
})

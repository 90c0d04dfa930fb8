package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Households declared in one file (GitOps: Sites with their Assets and Enrolments, as the
// samples declare them), applied, then removed with kubectl delete -f of the same file. The
// Site controller adopts the declared children (they name their site, not its uid); their
// deletion must not wait on that adoption, nor leave anything behind.
var _ = Describe("Households declared in one file, deleted with kubectl delete -f", func() {
	It("apply, converge, and delete -f finishes in time and leaves nothing of them in the organisation", func(ctx SpecContext) {
		ns := newNamespace(ctx, "gitops-delete")
		var manifest strings.Builder
		for _, f := range []string{"10_household.yaml", "20_half_hourly_household.yaml"} {
			data, err := os.ReadFile(filepath.Join(samplesDir(), f))
			Expect(err).NotTo(HaveOccurred())
			manifest.WriteString(strings.ReplaceAll(string(data), "namespace: demo", "namespace: "+ns))
			manifest.WriteString("\n---\n")
		}
		file := filepath.Join(GinkgoT().TempDir(), "households.yaml")
		Expect(os.WriteFile(file, []byte(manifest.String()), 0o600)).To(Succeed())

		mustKubectl(Default, ctx, "apply", "-f", file)
		Eventually(func(g Gomega) {
			settled(ctx, g, ns)
			g.Expect(flexsiteObjectsIn(ctx, g, ns)).To(HaveLen(7), "2 sites, 3 assets and 2 enrolments")
		}).Should(Succeed())

		By("kubectl delete -f of the same file, waiting for the objects to go")
		r := kubectl(ctx, "delete", "-f", file, "--ignore-not-found", "--timeout=60s")
		Expect(r.Err).NotTo(HaveOccurred(), "%s", r)
		Expect(flexsiteObjectsIn(ctx, Default, ns)).To(BeEmpty(), "what the delete left in the organisation")
	})
})

// flexsiteObjectsIn names every household object of ns (kind/name) the API server holds.
func flexsiteObjectsIn(ctx context.Context, g Gomega, ns string) []string {
	var names []string
	lists := map[string]client.ObjectList{
		"Site": &flexv1.SiteList{}, "Asset": &flexv1.AssetList{}, "Enrolment": &flexv1.EnrolmentList{},
		"RewardLedger": &flexv1.RewardLedgerList{}, "MPANClaim": &flexv1.MPANClaimList{},
		"DeviceConnection": &flexv1.DeviceConnectionList{},
	}
	for kind, list := range lists {
		g.Expect(env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		items, err := meta.ExtractList(list)
		g.Expect(err).NotTo(HaveOccurred())
		for _, item := range items {
			names = append(names, kind+"/"+item.(client.Object).GetName())
		}
	}
	return names
}

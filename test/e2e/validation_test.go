package e2e_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("kubectl apply of bad input", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx, "e2e-invalid") })

	It("refuses a Site whose MPAN check digit is wrong, naming the field", func(ctx SpecContext) {
		r := kubectlIn(ctx, fmt.Sprintf(`apiVersion: flexsite.io/v1alpha1
kind: Site
metadata:
  name: bad-mpan
  namespace: %s
spec:
  mpan: "1234567890123"
  postcode: SW1A 1AA
`, ns), "apply", "-f", "-")
		Expect(r.Err).To(HaveOccurred(), "%s", r)
		Expect(r.Stderr).To(ContainSubstring(`spec.mpan: Invalid value: "1234567890123": MPAN check digit is invalid`))
		Expect(kubectl(ctx, "get", "site", "-n", ns, "bad-mpan").Err).To(HaveOccurred(), "the Site must not be stored")
	})

	It("refuses an Asset whose site does not exist, naming spec.siteName", func(ctx SpecContext) {
		r := kubectlIn(ctx, fmt.Sprintf(`apiVersion: flexsite.io/v1alpha1
kind: Asset
metadata:
  name: orphan
  namespace: %s
spec:
  siteName: mpan-1200000000011
  externalID: orphan-1
  type: charger
  powerW: 7000
`, ns), "apply", "-f", "-")
		Expect(r.Err).To(HaveOccurred(), "%s", r)
		Expect(r.Stderr).To(ContainSubstring(`spec.siteName: Not found: "mpan-1200000000011"`))
		Expect(kubectl(ctx, "get", "asset", "-n", ns, "orphan").Err).To(HaveOccurred(), "the Asset must not be stored")
	})
})

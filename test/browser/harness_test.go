package browser_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/chromedp/chromedp"

	"github.com/flexsite/flexsite/test/browser"
)

var _ = Describe("The browser harness", func() {
	It("loads a page of the REST API and records the request from the DevTools network events", func() {
		b := newBrowser()
		Expect(b.Do(step, chromedp.Navigate(serverURL+"/docs"))).To(Succeed())
		Expect(b.Requests()).To(ContainElement(HaveField("URL", serverURL+"/docs")))
		violations, err := b.Axe(step)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Printf("axe on /docs: %d violations (%d serious or critical)\n", len(violations), len(browser.Serious(violations)))
	})
})

package browser_test

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/hostedflow"
	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/meters/synth"
	"github.com/flexsite/flexsite/internal/meterstore"
)

// findMeterPostcode is where the browser suite's register has its meter points (an anchor of
// synth's).
const findMeterPostcode = "M1 1AE"

// loadRegister loads a small synthetic register into the suite's database: the meter points
// at findMeterPostcode, in the search's order.
func loadRegister(ctx SpecContext) []meters.Point {
	GinkgoHelper()
	if testDB == nil {
		Skip("Find my meter needs the meter-point register (PostgreSQL)")
	}
	var file bytes.Buffer
	Expect(synth.WriteCSV(&file, 3702, 300, []string{findMeterPostcode})).To(Succeed())
	store := &meterstore.Store{Pool: testDB.Pool}
	_, err := store.Import(ctx, &file, nil)
	Expect(err).NotTo(HaveOccurred())
	points, err := store.AtPostcode(ctx, findMeterPostcode, meters.MaxSearchResults)
	Expect(err).NotTo(HaveOccurred())
	Expect(len(points)).To(BeNumerically(">", 2))
	return points
}

// noFullMPAN fails if any of the MPANs is anywhere in the flow's document: its markup or the
// value of a field.
func (f *flow) noFullMPAN(points []meters.Point) {
	GinkgoHelper()
	var page string
	f.eval(Default, `document.documentElement.outerHTML + "\n" + Array.from(document.querySelectorAll("input")).map((i) => i.value).join("\n")`, &page)
	for _, pt := range points {
		Expect(page).NotTo(ContainSubstring(pt.MPAN), "a full MPAN in the page")
	}
}

// focused is the id of the flow's focused element (or its tag).
func (f *flow) focused() string {
	GinkgoHelper()
	var active string
	f.eval(Default, `document.hasFocus() ? (document.activeElement.id || document.activeElement.tagName) : ""`, &active)
	return active
}

// tabTo presses Tab until the element with id has the focus.
func (f *flow) tabTo(id string) {
	GinkgoHelper()
	for range 20 {
		if f.focused() == id {
			return
		}
		f.do(Default, chromedp.KeyEvent("\t"))
	}
	Expect(f.focused()).To(Equal(id), "Tab never reached #%s", id)
}

var _ = Describe("Find my meter in the hosted flow", func() {
	It("finds the household's meter from its postcode with the keyboard alone, and never shows the full MPAN", func(ctx SpecContext) {
		points := loadRegister(ctx)
		o := newOrg(ctx)
		orgToken := o.token()
		siteID, token := o.componentToken(orgToken, "household-find-meter", embedder.Origin())
		b := newBrowser()
		f := embed(b, token, "")
		f.visible("#find_postcode")

		By("the postcode, typed; Enter searches")
		f.tabTo("find_postcode")
		f.do(Default, chromedp.KeyEvent("m1 1ae"), chromedp.KeyEvent("\r"))
		want := hostedflow.MetersFound(len(points), findMeterPostcode, len(points) == meters.MaxSearchResults)
		Eventually(func(g Gomega) string { return f.text(g, "#find-status") }).Should(Equal(want))
		Eventually(f.focused).Should(Equal("find-status"), "the announced result has the focus")
		var labels []string
		f.eval(Default, `Array.from(document.querySelectorAll("#meter-list label")).map((l) => l.textContent)`, &labels)
		addresses := make([]string, 0, len(points))
		for _, pt := range points {
			addresses = append(addresses, pt.Address())
		}
		Expect(labels).To(Equal(addresses), "every address at the postcode, in natural order")
		f.noFullMPAN(points)
		f.checkPage("1b-find-meter-results")

		By("Tab reaches the first address; the arrow key picks the second")
		f.do(Default, chromedp.KeyEvent("\t"))
		Expect(f.focused()).To(Equal("meter-0"))
		f.do(Default, chromedp.KeyEvent(kb.ArrowDown))
		var picked string
		f.eval(Default, `(document.querySelector("input[name=meter_ref]:checked") || {}).id || ""`, &picked)
		Expect(picked).To(Equal("meter-1"))
		var street string
		f.eval(Default, `document.getElementById("street_address").value + "|" + document.getElementById("postcode").value`, &street)
		Expect(street).To(HavePrefix(points[1].AddressLines[0]))
		Expect(street).To(HaveSuffix("|" + findMeterPostcode))
		f.noFullMPAN(points)
		f.checkPage("1c-find-meter-chosen")

		By("saved with the keyboard: the site's MPAN is the picked meter's; the page shows it masked")
		f.tabTo("mpan")
		f.do(Default, chromedp.KeyEvent("\t"), chromedp.KeyEvent("\r")) // the Save button
		f.atStep("consent")
		status, site := call(Default, "GET", "/entities/site/"+siteID, orgToken, nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(site).To(HaveKeyWithValue("mpan", points[1].MPAN))
		Expect(site).To(HaveKeyWithValue("postcode", findMeterPostcode))
		Expect(f.text(Default, "#consent-meter")).To(ContainSubstring(meters.MaskedMPAN(points[1].MPAN)))
		f.noFullMPAN(points)
		f.eval(Default, `document.querySelector("#form-consent button.back").click()`, nil)
		f.atStep("address")
		Expect(f.text(Default, "#meter-current")).To(ContainSubstring(meters.MaskedMPAN(points[1].MPAN)))
		f.noFullMPAN(points)
		if dir := screenshotDir(); dir != "" {
			f.screenshots(dir, "1d-find-meter-saved")
		}
	})

	It("says so when no address is found or the postcode is not one, and typing the MPAN still works", func(ctx SpecContext) {
		points := loadRegister(ctx)
		o := newOrg(ctx)
		orgToken := o.token()
		siteID, token := o.componentToken(orgToken, "household-no-meter", embedder.Origin())
		b := newBrowser()
		f := embed(b, token, "")
		f.visible("#find_postcode")
		f.checkPage("1a-find-meter")

		By("a postcode that is not one: the error at the search's postcode field")
		f.tabTo("find_postcode")
		f.do(Default, chromedp.KeyEvent("not a postcode"), chromedp.KeyEvent("\r"))
		Eventually(func(g Gomega) string { return f.text(g, "#find_postcode-error") }).Should(Equal(hostedflow.MeterPostcodeWords))
		var invalid string
		f.eval(Default, `document.getElementById("find_postcode").getAttribute("aria-invalid")`, &invalid)
		Expect(invalid).To(Equal("true"))

		By("a postcode with no meter points: none, and what to do, announced")
		f.set("find_postcode", "")
		f.do(Default, chromedp.KeyEvent("ZE9 9ZZ"), chromedp.KeyEvent("\r"))
		Eventually(func(g Gomega) string { return f.text(g, "#find-status") }).Should(Equal(hostedflow.MetersFound(0, "ZE9 9ZZ", false)))
		var hidden bool
		f.eval(Default, `document.getElementById("meter-choices").hidden`, &hidden)
		Expect(hidden).To(BeTrue())
		f.checkPage("1e-find-meter-none")

		By("the MPAN, typed, as before")
		f.tabTo("postcode")
		f.do(Default, chromedp.KeyEvent(findMeterPostcode), chromedp.KeyEvent("\t"), chromedp.KeyEvent("1 Typed Lane"))
		f.tabTo("mpan")
		f.do(Default, chromedp.KeyEvent(points[0].MPAN), chromedp.KeyEvent("\r"))
		f.atStep("consent")
		_, site := call(Default, "GET", "/entities/site/"+siteID, orgToken, nil)
		Expect(site).To(HaveKeyWithValue("mpan", points[0].MPAN))
		Expect(site).To(HaveKeyWithValue("address", "1 Typed Lane"))
		Expect(strings.TrimSpace(f.text(Default, "#consent-meter"))).To(ContainSubstring(meters.MaskedMPAN(points[0].MPAN)))
	})
})

package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	householdcore "github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/validation"
)

// Reliability under concurrency: requests racing for the same natural keys (an asset's
// external_id, a site's MPAN, a site's enrolment) against the real API server. Every answer
// is checked, and then the stored objects (through the direct client), which must be what the
// answers say. The fault-injection and crash specs are in faults_test.go; docs/reliability.md
// sums them up.

// validMPAN makes the i-th MPAN of a series (distributor 19, then i zero-padded to ten
// digits) with its check digit.
func validMPAN(i int) string {
	first12 := fmt.Sprintf("19%010d", i)
	return first12 + strconv.Itoa(validation.MPANCheckDigit(first12))
}

// relHTTP sends the concurrent requests: enough idle connections that 50 requests at once do
// not queue for one, and a timeout so a hung request fails the spec instead of the suite.
var relHTTP = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 128}, Timeout: time.Minute}

// relSeq numbers answers in the order they are received, across all goroutines.
var relSeq atomic.Int64

// relAnswer is one request's outcome. seq is taken once the whole answer has been read by
// the goroutine that sent it: the "completion order" of the race specs.
type relAnswer struct {
	label  string // what was asked (enrol, unenrol, ...)
	status int
	body   response
	err    error
	seq    int64
	start  time.Time
	end    time.Time
}

func (a relAnswer) String() string {
	return fmt.Sprintf("#%d %s %d %s (%s..%s)", a.seq, a.label, a.status, bytes.TrimSpace(a.body),
		a.start.Format("15:04:05.000000"), a.end.Format("15:04:05.000000"))
}

// json decodes the answer's body, or returns nil.
func (a relAnswer) json() map[string]any {
	var m map[string]any
	if json.Unmarshal(a.body, &m) != nil {
		return nil
	}
	return m
}

// relPost sends one JSON POST to base. It never calls Gomega, so goroutines may use it.
func relPost(hc *http.Client, base, path, token string, body any) relAnswer {
	return relSend(hc, http.MethodPost, base, path, token, body)
}

// relSend sends one request with a JSON body (or none) to base. It never calls Gomega.
func relSend(hc *http.Client, method, base, path, token string, body any) relAnswer {
	a := relAnswer{start: time.Now()}
	var reader io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			a.err = err
			return a
		}
		reader = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, base+path, reader)
	if err != nil {
		a.err = err
		return a
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		a.err = err
		a.end, a.seq = time.Now(), relSeq.Add(1)
		return a
	}
	a.body, a.err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	a.status = resp.StatusCode
	a.end, a.seq = time.Now(), relSeq.Add(1)
	return a
}

// relConcurrently runs n requests at once (released together by a barrier) and returns
// their answers by index.
func relConcurrently(n int, send func(i int) relAnswer) []relAnswer {
	answers := make([]relAnswer, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			answers[i] = send(i)
		})
	}
	close(start)
	wg.Wait()
	return answers
}

// relStatuses counts answers by status code, for the failure messages and the figures.
func relStatuses(answers []relAnswer) map[int]int {
	out := map[int]int{}
	for _, a := range answers {
		out[a.status]++
	}
	return out
}

// relStored lists the stored Flexsite objects of a namespace (direct client).
type relStored struct {
	sites      []flexv1.Site
	assets     []flexv1.Asset
	enrolments []flexv1.Enrolment
	ledgers    []flexv1.RewardLedger
}

func relList(ctx context.Context, g Gomega, ns string, opts ...client.ListOption) relStored {
	opts = append(opts, client.InNamespace(ns))
	sites, assets := &flexv1.SiteList{}, &flexv1.AssetList{}
	enrolments, ledgers := &flexv1.EnrolmentList{}, &flexv1.RewardLedgerList{}
	g.Expect(k8sClient.List(ctx, sites, client.InNamespace(ns))).To(Succeed())
	g.Expect(k8sClient.List(ctx, assets, opts...)).To(Succeed())
	g.Expect(k8sClient.List(ctx, enrolments, opts...)).To(Succeed())
	g.Expect(k8sClient.List(ctx, ledgers, opts...)).To(Succeed())
	return relStored{sites: sites.Items, assets: assets.Items, enrolments: enrolments.Items, ledgers: ledgers.Items}
}

// relOfSite lists the stored objects of one site: the site (if stored) and its children.
func relOfSite(ctx context.Context, g Gomega, ns, siteName string) relStored {
	st := relList(ctx, g, ns, index.OfSiteOnAPIServer(ns, siteName))
	var site []flexv1.Site
	for _, s := range st.sites {
		if s.Name == siteName {
			site = append(site, s)
		}
	}
	st.sites = site
	return st
}

// names lists the object names of what is stored, one "kind/name" each, sorted.
func (st relStored) names() []string {
	out := make([]string, 0, len(st.sites)+len(st.assets)+len(st.enrolments)+len(st.ledgers))
	for _, o := range st.sites {
		out = append(out, "Site/"+o.Name)
	}
	for _, o := range st.assets {
		out = append(out, "Asset/"+o.Name)
	}
	for _, o := range st.enrolments {
		out = append(out, "Enrolment/"+o.Name)
	}
	for _, o := range st.ledgers {
		out = append(out, "RewardLedger/"+o.Name)
	}
	sort.Strings(out)
	return out
}

// relProvisioned tells whether the Site controller published the site (in-flight protocol):
// it evaluates a site only once everything its request wrote exists.
func relProvisioned(s *flexv1.Site) bool {
	return s.Status.ObservedGeneration > 0
}

// relSharedAssetHousehold is an onboard of its own battery (first) and a charger whose
// external_id every racer uses (second): a loser has written its site and battery by the time
// it loses the charger, so it has something to undo.
func relSharedAssetHousehold(mpan, sharedExternalID string) map[string]any {
	return household(mpan, func(b map[string]any) {
		b["assets"] = []any{
			map[string]any{"external_id": "battery-" + mpan, "type": "battery",
				"properties": map[string]any{"power_kw": 5, "capacity_kwh": 13.5}},
			map[string]any{"external_id": sharedExternalID, "type": "charger", "asset_model": "zappi",
				"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}},
		}
	})
}

var _ = Describe("Reliability: races", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})

	It("lets exactly one of 50 concurrent onboards claim an asset external_id; every loser gets the 409 object form and leaves no site",
		func(ctx SpecContext) {
			const racers = 50
			const shared = "shared-charger-race"
			answers := relConcurrently(racers, func(i int) relAnswer {
				return relPost(relHTTP, apiServer.URL, "/entities/site/onboard", tok,
					relSharedAssetHousehold(validMPAN(1000+i), shared))
			})

			winner := -1
			for i, a := range answers {
				Expect(a.err).NotTo(HaveOccurred())
				if a.status == http.StatusOK {
					Expect(winner).To(Equal(-1), "a second 200: %s and %s", answers[max(winner, 0)], a)
					winner = i
				}
			}
			Expect(winner).NotTo(Equal(-1), "no onboard won: %v", relStatuses(answers))
			won := answers[winner].json()
			winnerSiteID := won["site"].(map[string]any)["site_id"]
			winnerAssetID := ""
			for _, item := range won["assets"].([]any) {
				if item.(map[string]any)["external_id"] == shared {
					winnerAssetID = item.(map[string]any)["asset_id"].(string)
				}
			}
			Expect(winnerAssetID).NotTo(BeEmpty())
			Expect(won["enrolment"]).To(Equal(map[string]any{"site_id": winnerSiteID, "status": "enrolled"}))

			for i, a := range answers {
				if i == winner {
					continue
				}
				Expect(a.status).To(Equal(http.StatusConflict), "%s", a)
				detail, ok := a.json()["detail"].(map[string]any)
				Expect(ok).To(BeTrue(), "the 409 object form: %s", a)
				Expect(detail).To(HaveKeyWithValue("existing_asset_id", winnerAssetID), "%s", a)
				Expect(detail).To(HaveKeyWithValue("external_id", shared))
				Expect(detail).To(HaveKeyWithValue("message", ContainSubstring("different site")))
			}

			winnerSite := identity.SiteNameForMPAN(validMPAN(1000 + winner))
			want := []string{
				"Asset/" + identity.AssetName("battery-"+validMPAN(1000+winner)),
				"Asset/" + identity.AssetName(shared),
				"Enrolment/" + identity.EnrolmentName(winnerSite, flexv1.PropositionLimitedPause),
				"Site/" + winnerSite,
			}
			sort.Strings(want)
			By("removing every losing site and what it wrote (rollback, then the site finalizer)")
			Eventually(func(g Gomega) []string { return relList(ctx, g, o.Namespace).names() }).Should(Equal(want))
			stored := relList(ctx, Default, o.Namespace)
			for _, a := range stored.assets {
				Expect(a.Spec.SiteName).To(Equal(winnerSite))
				Expect(a.DeletionTimestamp.IsZero()).To(BeTrue())
			}
			Expect(stored.sites[0].Labels[flexv1.IDLabel]).To(Equal(winnerSiteID))
			GinkgoWriter.Printf("FIGURES race onboard-shared-asset: %d concurrent onboards, answers %v\n",
				racers, relStatuses(answers))
		})

	It("keeps the stored enrolment in line with the last answer when enrol and unenrol race (20 rounds)", func(ctx SpecContext) {
		const rounds = 20
		mpan := validMPAN(2000)
		siteID := mustCall("POST", "/entities/site/onboard", tok, household(mpan))["site"].(map[string]any)["site_id"].(string)
		siteName := identity.SiteNameForMPAN(mpan)
		enrol := map[string]any{"proposition": "limited_pause", "override_withdrawal": true}
		unenrol := map[string]any{"proposition": "limited_pause"}

		// live and deleting count the site's limited_pause enrolments.
		count := func(g Gomega) (live, deleting int) {
			for _, e := range relOfSite(ctx, g, o.Namespace, siteName).enrolments {
				if e.Spec.Proposition != flexv1.PropositionLimitedPause {
					continue
				}
				if e.DeletionTimestamp.IsZero() {
					live++
				} else {
					deleting++
				}
			}
			return live, deleting
		}
		// The ordering rule: answers are ordered by relSeq, an atomic counter each sending
		// goroutine increments once it has read its whole answer, so two answers received "in
		// the same instant" still have distinct, ordered numbers; the last answer is the one with
		// the highest number.
		tally := map[string]int{}
		lastKinds := map[string]int{}
		everUnenrolled := false
		for round := range rounds {
			enrols, unenrols := 1+round%3, 1+(round/3)%2
			answers := relConcurrently(enrols+unenrols, func(i int) relAnswer {
				// A little deterministic jitter, so that the rounds interleave differently.
				time.Sleep(time.Duration((round*7+i*13)%15) * time.Millisecond)
				path, body, label := "/entities/site/"+siteID+"/enrol", any(enrol), "enrol"
				if i >= enrols {
					path, body, label = "/entities/site/"+siteID+"/unenrol", unenrol, "unenrol"
				}
				a := relPost(relHTTP, apiServer.URL, path, tok, body)
				a.label = label
				return a
			})
			sort.Slice(answers, func(i, j int) bool { return answers[i].seq < answers[j].seq })
			unenrolled := false
			for _, a := range answers {
				Expect(a.err).NotTo(HaveOccurred())
				Expect(a.status).To(Equal(http.StatusOK), "round %d: %s\nall answers: %v", round, a, answers)
				status := a.json()["status"].(string)
				tally[a.label+" "+status]++
				unenrolled = unenrolled || status == "unenrolled"
			}
			everUnenrolled = everUnenrolled || unenrolled
			last := answers[len(answers)-1]
			lastStatus := last.json()["status"].(string)
			lastKinds[lastStatus]++
			switch lastStatus {
			case "enrolled", "already_enrolled":
				Eventually(func(g Gomega) {
					live, deleting := count(g)
					g.Expect(live).To(Equal(1), "round %d, last answer %s; all: %v", round, last, answers)
					g.Expect(deleting).To(BeZero(), "round %d, last answer %s; all: %v", round, last, answers)
				}).Should(Succeed())
			case "unenrolled", "already_unenrolled":
				Eventually(func(g Gomega) {
					live, deleting := count(g)
					g.Expect(live+deleting).To(BeZero(), "round %d, last answer %s; all: %v", round, last, answers)
				}).Should(Succeed())
			default:
				Fail(fmt.Sprintf("round %d: unexpected status in %s", round, last))
			}
			if everUnenrolled {
				site := &flexv1.Site{}
				Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: siteName}, site)).To(Succeed())
				Expect(householdcore.LastWithdrawal(site, flexv1.PropositionLimitedPause)).NotTo(BeNil(),
					"round %d: an unenrol answered unenrolled, so the withdrawal must be on record", round)
			}
		}
		GinkgoWriter.Printf("FIGURES race enrol-unenrol: %d rounds, answers %v, last answers %v\n", rounds, tally, lastKinds)
	})

	It("stores one site and one of each asset from 20 concurrent identical initialise calls", func(ctx SpecContext) {
		const racers = 20
		mpan := validMPAN(3000)
		body := household(mpan, func(b map[string]any) { delete(b, "proposition") })
		answers := relConcurrently(racers, func(int) relAnswer {
			return relPost(relHTTP, apiServer.URL, "/entities/site/initialise", tok, body)
		})
		siteIDs := map[any]int{}
		sitesCreated := 0
		assetsCreated := map[any]int{}
		for _, a := range answers {
			Expect(a.err).NotTo(HaveOccurred())
			Expect(a.status).To(Equal(http.StatusOK), "%s", a)
			m := a.json()
			site := m["site"].(map[string]any)
			siteIDs[site["site_id"]]++
			if site["site_created"] == true {
				sitesCreated++
			}
			for _, item := range m["assets"].([]any) {
				asset := item.(map[string]any)
				if asset["asset_created"] == true {
					assetsCreated[asset["external_id"]]++
				}
			}
		}
		Expect(siteIDs).To(HaveLen(1), "every answer names the same site")
		Expect(sitesCreated).To(Equal(1), "exactly one answer created the site")
		Expect(assetsCreated).To(Equal(map[any]int{"charger-" + mpan: 1, "battery-" + mpan: 1}),
			"each asset was created by exactly one answer")

		siteName := identity.SiteNameForMPAN(mpan)
		want := []string{"Asset/" + identity.AssetName("battery-"+mpan), "Asset/" + identity.AssetName("charger-"+mpan), "Site/" + siteName}
		Expect(relList(ctx, Default, o.Namespace).names()).To(Equal(want))
		Eventually(func(g Gomega) {
			site := &flexv1.Site{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: siteName}, site)).To(Succeed())
			g.Expect(relProvisioned(site)).To(BeTrue())
		}).Should(Succeed())
		GinkgoWriter.Printf("FIGURES race initialise: %d concurrent identical calls, answers %v\n", racers, relStatuses(answers))
	})

	It("answers one of 20 concurrent create-asset calls with the same external_id with 200 and the rest with 409", func(ctx SpecContext) {
		const racers = 20
		mpan := validMPAN(4000)
		siteID := mustCall("POST", "/entities/site/onboard", tok, household(mpan))["site"].(map[string]any)["site_id"]
		body := map[string]any{"external_id": "raced-battery", "type": "battery", "site_id": siteID,
			"properties": map[string]any{"power_kw": 3, "capacity_kwh": 9.5}}
		answers := relConcurrently(racers, func(int) relAnswer {
			return relPost(relHTTP, apiServer.URL, "/entities/asset", tok, body)
		})
		var winnerID any
		for _, a := range answers {
			Expect(a.err).NotTo(HaveOccurred())
			switch a.status {
			case http.StatusOK:
				Expect(winnerID).To(BeNil(), "a second 200: %s", a)
				winnerID = a.json()["id"]
			case http.StatusConflict:
				Expect(a.json()["detail"]).To(ContainSubstring("already exists"), "%s", a)
			default:
				Fail(fmt.Sprintf("unexpected answer %s", a))
			}
		}
		Expect(winnerID).NotTo(BeNil(), "%v", relStatuses(answers))
		stored := &flexv1.Asset{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.AssetName("raced-battery")}, stored)).To(Succeed())
		Expect(stored.Labels[flexv1.IDLabel]).To(Equal(winnerID))
		Expect(relOfSite(ctx, Default, o.Namespace, identity.SiteNameForMPAN(mpan)).assets).To(HaveLen(3))
		GinkgoWriter.Printf("FIGURES race create-asset: %d concurrent calls, answers %v\n", racers, relStatuses(answers))
	})
})

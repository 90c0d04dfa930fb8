package server_test

import (
	"context"
	"net/http"
	"regexp"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// GET /rewards/{site_id}/transactions as production's operation answers it: without paging
// parameters the whole history (production has none, so a client written against it must get
// every transaction, however many), streamed when it is long; with Flexsite's limit a page,
// whose Link header names the next page while more follow.
var _ = Describe("GET /rewards/{site_id}/transactions: the whole history without paging parameters", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards)
		tok = o.token()
	})
	// history writes n transactions of the site straight into the ledger's table (the test's
	// setup: three a second, one in a hundred that never said when it happened) and answers
	// their ids in the statement's order, as the store reads them.
	history := func(ctx context.Context, siteID string, n int) []any {
		GinkgoHelper()
		key := rewardstore.Site{Namespace: o.Namespace, ID: siteID}
		_, err := testDB.Pool.Exec(ctx, `INSERT INTO reward_sites (organisation, site_id) VALUES ($1, $2)
			ON CONFLICT DO NOTHING`, key.Namespace, key.ID)
		Expect(err).NotTo(HaveOccurred())
		_, err = testDB.Pool.Exec(ctx, `INSERT INTO reward_transactions (organisation, site_id, transaction_id,
			transaction_type, credit_pence, start_at, occurred_at, source, request_digest)
			SELECT $1, $2, gen_random_uuid(), 'flex event', i, at, at, 'settlement', '\x00'::bytea
			FROM generate_series(1, $3::int) AS i, LATERAL (SELECT CASE WHEN i % 100 = 0 THEN NULL
				ELSE timestamptz '2025-01-06 17:00:00+00' + (i / 3) * interval '1 hour' END AS at) AS t`,
			key.Namespace, key.ID, n)
		Expect(err).NotTo(HaveOccurred())
		txs, err := (&rewardstore.Store{Pool: testDB.Pool}).Page(ctx, key, rewardstore.Page{Limit: n + 1})
		Expect(err).NotTo(HaveOccurred())
		Expect(txs).To(HaveLen(n))
		ids := make([]any, n)
		for i, tx := range txs {
			ids[i] = tx.ID
		}
		return ids
	}
	nextLink := regexp.MustCompile(`^<(/rewards/[^>]+)>; rel="next"$`)

	It("answers all 250 transactions in order without parameters, and with limit pages them, each page's Link naming the next", func(ctx SpecContext) {
		siteID := onboardedSite(tok, validMPAN(4801))
		path := "/rewards/" + siteID + "/transactions"
		want := history(ctx, siteID, 250)

		status, header, resp := callWithHeader("GET", path, tok, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Expect(transactionIDs(resp.Map())).To(Equal(want), "every transaction, newest first")
		Expect(header.Get("Link")).To(BeEmpty(), "the whole history has no next page")
		Expect(transactionIDs(mustCall("GET", path, tok, nil))).To(Equal(want), "read again (kept)")

		By("with limit: pages of 100, each naming the next while more follow")
		var got []any
		next := path + "?limit=100"
		for pages := 0; next != ""; pages++ {
			Expect(pages).To(BeNumerically("<", 3))
			status, header, resp := callWithHeader("GET", next, tok, nil)
			Expect(status).To(Equal(http.StatusOK), "%s: %s", next, resp)
			page := transactionIDs(resp.Map())
			Expect(len(page)).To(BeNumerically("<=", 100))
			got = append(got, page...)
			next = ""
			if link := header.Get("Link"); link != "" {
				m := nextLink.FindStringSubmatch(link)
				Expect(m).NotTo(BeNil(), "Link %q", link)
				next = m[1]
			}
		}
		Expect(got).To(Equal(want))
		_, header, _ = callWithHeader("GET", path+"?limit=50&offset=200", tok, nil)
		Expect(header.Get("Link")).To(BeEmpty(), "the last page names none")
		_, header, _ = callWithHeader("GET", path+"?limit=50&offset=150", tok, nil)
		Expect(header.Get("Link")).To(Equal(`<` + path + `?limit=50&offset=200>; rel="next"`))
	})

	It("streams a history longer than the batches it is read in (1,201 transactions), all in order, valid against the served document", func(ctx SpecContext) {
		siteID := onboardedSite(tok, validMPAN(4802))
		path := "/rewards/" + siteID + "/transactions"
		want := history(ctx, siteID, 1201)

		status, header, resp := callWithHeader("GET", path, tok, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Expect(header.Get("Content-Length")).To(BeEmpty(), "written as it is read, not held to be counted")
		body := servedContract().call("GET", path, tok, nil)
		Expect(transactionIDs(body)).To(Equal(want), "every transaction, newest first, across the batches")
		Expect(body).To(HaveKeyWithValue("site_id", siteID))
		Expect(body).To(HaveKey("is_below_withdrawal_minimum"))

		By("since and until without limit: every transaction of the window, across the batches")
		window := transactionIDs(mustCall("GET", path+"?since=2025-01-10T00:00:00Z&until=2025-01-22T00:00:00Z", tok, nil))
		Expect(len(window)).To(BeNumerically(">", 500))
		first := slices.Index(want, window[0])
		Expect(first).To(BeNumerically(">", 0))
		Expect(window).To(Equal(want[first : first+len(window)]))

		By("limit still pages")
		Expect(transactionIDs(mustCall("GET", path+"?limit=1000&offset=200", tok, nil))).To(Equal(want[200:1200]))
	})
})

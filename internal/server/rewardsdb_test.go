package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
	hh "github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// The reward history in PostgreSQL, through the REST API: credits by rewards_write clients,
// payment statuses by rewards_admin clients, pages from the database, and the database taken
// away and given back.
var _ = Describe("Rewards in the database", func() {
	const mpan = "1200000000011"
	var (
		o        org
		tok      string
		siteID   string
		siteName string
	)
	allRoles := []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards, flexv1.RoleComponents,
		flexv1.RoleRewardsWrite, flexv1.RoleRewardsAdmin}
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx, allRoles...)
		tok = o.token()
		siteID = onboardedSite(tok, mpan)
		siteName = identity.SiteNameForMPAN(mpan)
	})
	txPath := func() string { return "/rewards/" + siteID + "/transactions" }
	creditBody := func(id string, pence int64) map[string]any {
		return map[string]any{"transaction_id": id, "transaction_type": "flex event", "credit_pence": pence,
			"start_time": "2026-10-06T17:30:00Z", "end_time": "2026-10-06T18:30:00+00:00", "flex_kwh": -1.1,
			"settlement_date": "2026-10-08"}
	}

	It("credits once by transaction_id: 201, the same again 200 with the stored record, another record 409", func(ctx SpecContext) {
		id := identity.NewID()
		status, resp := call("POST", txPath(), tok, creditBody(id, 35))
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"transaction_id": id, "transaction_type": "flex event",
			"credit_pence": float64(35), "start_time": "2026-10-06T17:30:00Z", "end_time": "2026-10-06T18:30:00Z",
			"settlement_date": "2026-10-08", "flex_kwh": -1.1}))

		status, again := call("POST", txPath(), tok, creditBody(id, 35))
		Expect(status).To(Equal(http.StatusOK), "%s", again)
		Expect(again.Map()).To(Equal(resp.Map()))

		status, other := call("POST", txPath(), tok, creditBody(id, 36))
		Expect(status).To(Equal(http.StatusConflict), "%s", other)
		Expect(other.Detail()).To(ContainSubstring("transaction_id"))

		body := mustCall("GET", txPath(), tok, nil)
		Expect(transactionIDs(body)).To(Equal([]any{id}))
		Expect(mustCall("GET", "/rewards/"+siteID+"/info", tok, nil)["current_balance_pence"]).To(Equal(float64(35)))

		By("the controller makes the site's ledger, whose status is the summary")
		Eventually(func(g Gomega) {
			l := &flexv1.RewardLedger{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.RewardLedgerName(siteName)}, l)).
				To(Succeed())
			g.Expect(l.Spec.Transactions).To(BeEmpty())
			g.Expect(l.Status.BalancePence).To(HaveValue(BeEquivalentTo(35)))
			g.Expect(l.Status.TotalEarnedPence).To(HaveValue(BeEquivalentTo(35)))
			g.Expect(l.Status.TransactionCount).To(HaveValue(BeEquivalentTo(1)))
			g.Expect(l.Status.RecentTransactions).To(HaveLen(1))
			g.Expect(l.Status.LastCredited).NotTo(BeNil())
		}).Should(Succeed())
	})

	It("decides a transaction_id within the organisation: another organisation's id is neither 409 nor 200, another site's of its own is 409", func(ctx SpecContext) {
		id := identity.NewID()
		status, resp := call("POST", txPath(), tok, creditBody(id, 35))
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)

		other := newOrg(ctx, allRoles...)
		otherTok := other.token()
		otherSite := onboardedSite(otherTok, validMPAN(9412))
		otherPath := "/rewards/" + otherSite + "/transactions"
		status, resp = call("POST", otherPath, otherTok, creditBody(id, 36))
		Expect(status).To(Equal(http.StatusCreated), "another organisation's id is not this one's business: %s", resp)
		Expect(resp.Map()).To(HaveKeyWithValue("credit_pence", float64(36)))
		status, resp = call("POST", otherPath, otherTok, creditBody(id, 36))
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Expect(transactionIDs(mustCall("GET", txPath(), tok, nil))).To(Equal([]any{id}))
		Expect(mustCall("GET", txPath(), tok, nil)["transactions"].([]any)[0]).To(HaveKeyWithValue("credit_pence", float64(35)))

		secondSite := onboardedSite(tok, validMPAN(9413))
		status, resp = call("POST", "/rewards/"+secondSite+"/transactions", tok, creditBody(id, 35))
		Expect(status).To(Equal(http.StatusConflict), "the id is another site's of the organisation: %s", resp)
	})

	DescribeTable("refuses a malformed credit with a 422 naming the field",
		func(mutate func(map[string]any), loc []any, typ string) {
			body := creditBody(identity.NewID(), 10)
			mutate(body)
			status, resp := call("POST", txPath(), tok, body)
			expectValidationItem(status, resp, loc, typ)
		},
		Entry("no transaction_id", func(b map[string]any) { delete(b, "transaction_id") }, []any{"body", "transaction_id"}, "missing"),
		Entry("a transaction_id that is not a UUID", func(b map[string]any) { b["transaction_id"] = "x" }, []any{"body", "transaction_id"}, ""),
		Entry("an unknown type", func(b map[string]any) { b["transaction_type"] = "gift" }, []any{"body", "transaction_type"}, "enum"),
		Entry("a withdrawal", func(b map[string]any) { b["transaction_type"] = "withdrawal" }, []any{"body", "transaction_type"}, "enum"),
		Entry("credit_pence not an integer", func(b map[string]any) { b["credit_pence"] = 1.5 }, []any{"body", "credit_pence"}, "int_type"),
		Entry("credit_pence a string", func(b map[string]any) { b["credit_pence"] = "10" }, []any{"body", "credit_pence"}, "int_type"),
		Entry("a payment_status", func(b map[string]any) { b["payment_status"] = "approved" }, []any{"body", "payment_status"}, "extra_forbidden"),
		Entry("a time without a zone", func(b map[string]any) { b["start_time"] = "2026-10-06T17:30:00" }, []any{"body", "start_time"}, ""),
		Entry("end before start", func(b map[string]any) { b["end_time"] = "2026-10-06T17:00:00Z" }, []any{"body", "end_time"}, "value_error"),
		Entry("a bad settlement date", func(b map[string]any) { b["settlement_date"] = "2026-02-30" }, []any{"body", "settlement_date"}, ""),
		Entry("neither start_time nor settlement_date", func(b map[string]any) {
			delete(b, "start_time")
			delete(b, "end_time")
			delete(b, "settlement_date")
		}, []any{"body", "start_time"}, "missing"),
	)

	It("answers bad JSON with 422 and a malformed site id with 422, an unknown site with 404", func() {
		status, resp := call("POST", txPath(), tok, raw(`{"transaction_id": `))
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		status, resp = call("POST", "/rewards/not-a-uuid/transactions", tok, creditBody(identity.NewID(), 1))
		expectValidationItem(status, resp, []any{"path", "site_id"}, "")
		status, resp = call("POST", "/rewards/00000000-0000-4000-8000-000000000000/transactions", tok, creditBody(identity.NewID(), 1))
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
	})

	It("needs rewards_write to credit and rewards_admin to move a payment status", func(ctx SpecContext) {
		reader := newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards)
		readerTok := reader.token()
		readerSite := onboardedSite(readerTok, "1012345678903")
		status, resp := call("POST", "/rewards/"+readerSite+"/transactions", readerTok, creditBody(identity.NewID(), 1))
		Expect(status).To(Equal(http.StatusForbidden), "%s", resp)
		status, resp = call("PATCH", "/rewards/"+readerSite+"/transactions/"+identity.NewID(), readerTok,
			map[string]any{"payment_status": "approved"})
		Expect(status).To(Equal(http.StatusForbidden), "%s", resp)
		// Another organisation's site is not found, whatever the roles.
		status, resp = call("POST", "/rewards/"+readerSite+"/transactions", tok, creditBody(identity.NewID(), 1))
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
	})

	It("answers a kept page until the ledger changes, whoever changed it: this replica at once, another writer once notified", func(ctx SpecContext) {
		first := identity.NewID()
		status, resp := call("POST", txPath(), tok, creditBody(first, 10))
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		Expect(transactionIDs(mustCall("GET", txPath(), tok, nil))).To(Equal([]any{first}))
		Expect(transactionIDs(mustCall("GET", txPath(), tok, nil))).To(Equal([]any{first}))

		By("a write through another pool (another replica, a settlement run, the admin tool)")
		pool, err := db.Open(ctx, testDB.URL)
		Expect(err).NotTo(HaveOccurred())
		defer pool.Close()
		other := flexv1.RewardTransaction{ID: identity.NewID(), Type: "flex event", CreditPence: 5,
			StartTime: &metav1.Time{Time: time.Date(2026, 10, 13, 17, 30, 0, 0, time.UTC)}}
		_, _, err = (&rewardstore.Store{Pool: pool}).Append(ctx, rewardstore.Site{Namespace: o.Namespace, ID: siteID}, other,
			rewardstore.SourceSettlement)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) []any { return transactionIDs(mustCallG(g, "GET", txPath(), tok, nil)) }).
			Should(Equal([]any{other.ID, first}))
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/rewards/"+siteID+"/info", tok, nil)["current_balance_pence"]
		}).
			Should(Equal(float64(15)))

		By("a write through this replica: the very next read")
		third := creditBody(identity.NewID(), 7)
		third["start_time"], third["end_time"] = "2026-10-20T17:30:00Z", "2026-10-20T18:30:00Z"
		status, resp = call("POST", txPath(), tok, third)
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		Expect(transactionIDs(mustCall("GET", txPath(), tok, nil))).To(Equal([]any{third["transaction_id"], other.ID, first}))
		Expect(mustCall("GET", "/rewards/"+siteID+"/info", tok, nil)["current_balance_pence"]).To(Equal(float64(22)))
	})

	It("moves a withdrawal's payment status on, recording who and when, and counts the balance by it", func(ctx SpecContext) {
		store := &rewardstore.Store{Pool: testDB.Pool}
		site := rewardstore.Site{Namespace: o.Namespace, ID: siteID}
		status, resp := call("POST", txPath(), tok, creditBody(identity.NewID(), 2000))
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		withdrawal := flexv1.RewardTransaction{ID: identity.NewID(), Type: hh.TransactionWithdrawal, CreditPence: -2000,
			StartTime: &metav1.Time{Time: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}, PaymentStatus: hh.PaymentPendingApproval}
		_, _, err := store.Append(ctx, site, withdrawal, rewardstore.SourceWithdrawal)
		Expect(err).NotTo(HaveOccurred())
		// The withdrawal was written past the API: the balances the API keeps learn of it from
		// the database's notification, a moment later.
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/rewards/"+siteID+"/info", tok, nil)["current_balance_pence"]
		}).Should(Equal(float64(0)))

		path := txPath() + "/" + withdrawal.ID
		got := mustCall("PATCH", path, tok, map[string]any{"payment_status": "rejected"})
		Expect(got).To(HaveKeyWithValue("payment_status", "rejected"))
		Expect(got).To(HaveKeyWithValue("transaction_id", withdrawal.ID))
		// A rejected withdrawal paid nothing out: the balance is the household's again.
		Expect(mustCall("GET", "/rewards/"+siteID+"/info", tok, nil)["current_balance_pence"]).To(Equal(float64(2000)))
		changes, err := store.StatusChanges(ctx, site, withdrawal.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(changes).To(HaveLen(1))
		Expect(changes[0].From).To(Equal(hh.PaymentPendingApproval))
		Expect(changes[0].To).To(BeEquivalentTo("rejected"))
		Expect(changes[0].Actor).To(Equal("api-client:" + o.Namespace + "/" + strings.ToLower(o.Username)))
		Expect(changes[0].At).To(BeTemporally("~", time.Now(), time.Minute))

		By("refusing what is not a withdrawal's step, or not a withdrawal")
		status, resp = call("PATCH", path, tok, map[string]any{"payment_status": "pending_approval"})
		expectValidationItem(status, resp, []any{"body", "payment_status"}, "enum")
		status, resp = call("PATCH", path, tok, map[string]any{"payment_status": "approved", "note": "x"})
		expectValidationItem(status, resp, []any{"body", "note"}, "extra_forbidden")
		credit := transactionIDs(mustCall("GET", txPath()+"?limit=10", tok, nil))[1].(string)
		status, resp = call("PATCH", txPath()+"/"+credit, tok, map[string]any{"payment_status": "approved"})
		expectValidationItem(status, resp, []any{"path", "transaction_id"}, "value_error")
		status, resp = call("PATCH", txPath()+"/"+identity.NewID(), tok, map[string]any{"payment_status": "approved"})
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
	})

	It("walks a payment's state machine: a step it does not allow is 409 and records nothing, so a failed payment is never posted after the money was withdrawn again", func(ctx SpecContext) {
		store := &rewardstore.Store{Pool: testDB.Pool}
		site := rewardstore.Site{Namespace: o.Namespace, ID: siteID}
		status, resp := call("POST", txPath(), tok, creditBody(identity.NewID(), 2000))
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		withdraw := func() string {
			tx, err := store.Withdraw(ctx, site, func(b hh.Balance) (flexv1.RewardTransaction, error) {
				return hh.RewardPolicy{}.Withdrawal(b, time.Now(), identity.NewID())
			})
			Expect(err).NotTo(HaveOccurred())
			return tx.ID
		}
		balance := func() any { return mustCall("GET", "/rewards/"+siteID+"/info", tok, nil)["current_balance_pence"] }
		first := withdraw()
		path := txPath() + "/" + first
		refused := func(to, says string) {
			GinkgoHelper()
			before, err := store.StatusChanges(ctx, site, first)
			Expect(err).NotTo(HaveOccurred())
			status, resp := call("PATCH", path, tok, map[string]any{"payment_status": to})
			Expect(status).To(Equal(http.StatusConflict), "%s", resp)
			Expect(resp.Detail()).To(ContainSubstring(says))
			Expect(store.StatusChanges(ctx, site, first)).To(Equal(before), "a refused step records nothing")
		}

		refused("posted", "cannot move from pending_approval to posted")
		Expect(mustCall("PATCH", path, tok, map[string]any{"payment_status": "approved"})).
			To(HaveKeyWithValue("payment_status", "approved"))
		refused("approved", "is approved already")
		refused("rejected", "from approved it may move to processing or cancelled")
		Expect(mustCall("PATCH", path, tok, map[string]any{"payment_status": "processing"})).
			To(HaveKeyWithValue("payment_status", "processing"))

		By("two changes at once: one is judged after the other, so only one passes")
		var wg sync.WaitGroup
		statuses := map[string]int{}
		var mu sync.Mutex
		for _, to := range []string{"failed", "posted"} {
			wg.Go(func() {
				defer GinkgoRecover()
				st, _ := call("PATCH", path, tok, map[string]any{"payment_status": to})
				mu.Lock()
				statuses[to] = st
				mu.Unlock()
			})
		}
		wg.Wait()
		Expect([]int{statuses["failed"], statuses["posted"]}).To(ConsistOf(http.StatusOK, http.StatusConflict))
		changes, err := store.StatusChanges(ctx, site, first)
		Expect(err).NotTo(HaveOccurred())
		Expect(changes).To(HaveLen(3))
		if statuses["posted"] == http.StatusOK {
			refused("failed", "posted to failed")
			Expect(mustCall("PATCH", path, tok, map[string]any{"payment_status": "returned"})).
				To(HaveKeyWithValue("payment_status", "returned"))
		}

		By("the money back once (failed or returned, both final): withdrawn again, the first cannot be posted")
		Expect(balance()).To(Equal(float64(2000)))
		second := withdraw()
		Expect(store.Balance(ctx, site)).To(HaveField("Current", BeEquivalentTo(0)))
		refused("posted", "is final")
		Expect(store.Balance(ctx, site)).To(HaveField("Current", BeEquivalentTo(0)))
		// Withdrawn in the store, not through this replica: /info follows once summarised.
		Eventually(balance).Should(Equal(float64(0)))
		got, err := store.Get(ctx, site, second)
		Expect(err).NotTo(HaveOccurred())
		Expect(got.PaymentStatus).To(Equal(hh.PaymentPendingApproval))
	})

	It("pages the history with since and until, newest first", func() {
		var ids []string
		for day := 1; day <= 4; day++ {
			id := identity.NewID()
			ids = append(ids, id)
			body := creditBody(id, 100)
			body["start_time"] = time.Date(2026, 10, day, 12, 0, 0, 0, time.UTC).Format(time.RFC3339)
			delete(body, "end_time")
			status, resp := call("POST", txPath(), tok, body)
			Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		}
		Expect(transactionIDs(mustCall("GET", txPath()+"?since=2026-10-02T00:00:00Z&until=2026-10-04T00:00:00Z", tok, nil))).
			To(Equal([]any{ids[2], ids[1]}))
		Expect(transactionIDs(mustCall("GET", txPath()+"?since=2026-10-02T12:00:00%2B00:00&limit=1&offset=1", tok, nil))).
			To(Equal([]any{ids[2]}))
		status, resp := call("GET", txPath()+"?since=yesterday", tok, nil)
		expectValidationItem(status, resp, []any{"query", "since"}, "")
		status, resp = call("GET", txPath()+"?since=2026-10-04T00:00:00Z&until=2026-10-02T00:00:00Z", tok, nil)
		expectValidationItem(status, resp, []any{"query", "until"}, "value_error")
	})

	It("answers /info from the RewardLedger summary: its own writes at once, others' once summarised", func(ctx SpecContext) {
		info := func() map[string]any { return mustCall("GET", "/rewards/"+siteID+"/info", tok, nil) }
		Expect(info()).To(And(HaveKeyWithValue("current_balance_pence", 0.0), HaveKeyWithValue("can_withdraw", false)))

		By("a credit from elsewhere (settlement, another replica): /info follows the summary")
		store := &rewardstore.Store{Pool: testDB.Pool}
		key := rewardstore.Site{Namespace: o.Namespace, ID: siteID}
		start := metav1.NewTime(time.Date(2026, 9, 1, 17, 0, 0, 0, time.UTC))
		_, _, err := store.Append(ctx, key, flexv1.RewardTransaction{ID: identity.NewID(), Type: "flex event",
			CreditPence: 1500, StartTime: &start, SettlementDate: "2026-09-03"}, rewardstore.SourceAPI)
		Expect(err).NotTo(HaveOccurred())
		Eventually(info).Should(And(HaveKeyWithValue("current_balance_pence", 1500.0),
			HaveKeyWithValue("total_earnings_pence", 1500.0), HaveKeyWithValue("can_withdraw", true)))
		ledger := &flexv1.RewardLedger{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.RewardLedgerName(siteName)}, ledger)).
			To(Succeed())
		Expect(ledger.Status.FirstRewardedAt).To(HaveValue(WithTransform(func(t metav1.Time) time.Time { return t.UTC() },
			Equal(start.UTC()))), "the withdrawal wait counts from the first reward")
		Expect(ledger.Status.HistoryRevision).To(HaveValue(BeEquivalentTo(1)))

		By("this API's own credit: read back at once, before or after the summary shows it")
		status, resp := call("POST", txPath(), tok, creditBody(identity.NewID(), 35))
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		Expect(info()).To(HaveKeyWithValue("current_balance_pence", 1535.0))
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.RewardLedgerName(siteName)}, ledger)).
				To(Succeed())
			g.Expect(ledger.Status.HistoryRevision).To(HaveValue(BeEquivalentTo(2)))
			g.Expect(ledger.Status.BalancePence).To(HaveValue(BeEquivalentTo(1535)))
		}).Should(Succeed())
		Expect(info()).To(HaveKeyWithValue("current_balance_pence", 1535.0))
	})

	It("answers 503 with Retry-After while the database is away, keeps the Kubernetes endpoints, and resumes", func(ctx SpecContext) {
		if !testDB.CanStop() {
			Skip("the test database's server is not this process's")
		}
		id := identity.NewID()
		By("a credit, summarised in the site's RewardLedger")
		earlier := creditBody(identity.NewID(), 25)
		status, resp := call("POST", txPath(), tok, earlier)
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		Eventually(func(g Gomega) {
			l := &flexv1.RewardLedger{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.RewardLedgerName(siteName)}, l)).
				To(Succeed())
			g.Expect(l.Status.BalancePence).To(HaveValue(BeEquivalentTo(25)))
		}).Should(Succeed())
		By("the database stopped")
		Expect(testDB.Stop()).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(testDB.Start(ctx)).To(Succeed()) })
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"GET", txPath(), nil},
			{"POST", txPath(), creditBody(id, 10)},
			{"PATCH", txPath() + "/" + identity.NewID(), map[string]any{"payment_status": "approved"}},
		} {
			status, header, resp := callWithHeader(c.method, c.path, tok, c.body)
			Expect(status).To(Equal(http.StatusServiceUnavailable), "%s %s: %s", c.method, c.path, resp)
			Expect(header.Get("Retry-After")).To(MatchRegexp(`^[1-9][0-9]*$`), "%s %s", c.method, c.path)
			Expect(resp.Detail()).To(ContainSubstring("unavailable"))
		}
		By("the Kubernetes endpoints answering meanwhile")
		Expect(mustCall("GET", "/entities/site/"+siteID, tok, nil)).To(HaveKeyWithValue("id", siteID))
		Expect(mustCall("GET", "/entities/site/"+siteID+"/eligibility", tok, nil)).NotTo(BeEmpty())
		Expect(mustCall("GET", "/rewards/"+siteID+"/info", tok, nil)).To(And(HaveKeyWithValue("current_balance_pence", 25.0),
			HaveKeyWithValue("total_earnings_pence", 25.0)), "/info answers from the ledger's summary")

		By("the database back: the credit refused meanwhile was not stored, and is now")
		Expect(testDB.Start(ctx)).To(Succeed())
		Eventually(func() int {
			status, _ := call("GET", txPath(), tok, nil)
			return status
		}).Should(Equal(http.StatusOK))
		Expect(transactionIDs(mustCall("GET", txPath(), tok, nil))).To(Equal([]any{earlier["transaction_id"]}))
		status, resp = call("POST", txPath(), tok, creditBody(id, 10))
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
	})

	It("makes the ledger of a site first credited while no manager listened, once the listener is back", func(ctx SpecContext) {
		if !testDB.CanStop() {
			Skip("the test database's server is not this process's")
		}
		ledgerKey := client.ObjectKey{Namespace: o.Namespace, Name: identity.RewardLedgerName(siteName)}
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, ledgerKey, &flexv1.RewardLedger{}))).To(BeTrue(),
			"a site without history has no ledger yet")
		By("a first credit committed without the notification a listener would have heard (as while it reconnected)")
		txID := identity.NewID()
		// In one transaction, retried: a connection the pool kept from before another spec's
		// database restart fails once (57P01) and is dropped.
		Eventually(func() error {
			return pgx.BeginFunc(ctx, testDB.Pool, func(q pgx.Tx) error {
				if _, err := q.Exec(ctx, `INSERT INTO reward_sites (organisation, site_id) VALUES ($1, $2)`,
					o.Namespace, siteID); err != nil {
					return err
				}
				_, err := q.Exec(ctx, `INSERT INTO reward_transactions (organisation, site_id, transaction_id,
					transaction_type, credit_pence, occurred_at, source, request_digest)
					VALUES ($1, $2, $3, 'flex event', 40, now(), 'api', '\x00')`, o.Namespace, siteID, txID)
				return err
			})
		}).Should(Succeed())
		By("the database away and back: the listener's connection lost and found again")
		Expect(testDB.Stop()).To(Succeed())
		Expect(testDB.Start(ctx)).To(Succeed())
		Eventually(func(g Gomega) {
			l := &flexv1.RewardLedger{}
			g.Expect(k8sClient.Get(ctx, ledgerKey, l)).To(Succeed())
			g.Expect(l.Status.BalancePence).To(HaveValue(BeEquivalentTo(40)))
		}).Should(Succeed())
	})

	It("lets concurrent credits of one id store it once", func() {
		id := identity.NewID()
		var wg sync.WaitGroup
		statuses := make([]int, 6)
		for i := range statuses {
			wg.Go(func() {
				defer GinkgoRecover()
				statuses[i], _ = call("POST", txPath(), tok, creditBody(id, 42))
			})
		}
		wg.Wait()
		created := 0
		for _, s := range statuses {
			Expect(s).To(BeElementOf(http.StatusCreated, http.StatusOK))
			if s == http.StatusCreated {
				created++
			}
		}
		Expect(created).To(Equal(1))
		Expect(mustCall("GET", txPath(), tok, nil)["transactions"]).To(HaveLen(1))
	})
})

// callWithHeader is call answering the response's headers too.
func callWithHeader(method, path, token string, body any) (int, http.Header, response) {
	GinkgoHelper()
	var reader *strings.Reader
	if body != nil {
		data, err := json.Marshal(body)
		Expect(err).NotTo(HaveOccurred())
		reader = strings.NewReader(string(data))
	} else {
		reader = strings.NewReader("")
	}
	req, err := http.NewRequest(method, apiServer.URL+path, reader)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	var buf strings.Builder
	_, _ = io.Copy(&buf, resp.Body)
	return resp.StatusCode, resp.Header, response(buf.String())
}

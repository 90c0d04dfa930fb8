package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	hh "github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// exactCall is mustCall decoding numbers as written (json.Number), to check them exactly.
func exactCall(method, path, token string) map[string]any {
	GinkgoHelper()
	status, resp := call(method, path, token, nil)
	Expect(status).To(Equal(http.StatusOK), "%s %s: %s", method, path, resp)
	dec := json.NewDecoder(bytes.NewReader(resp))
	dec.UseNumber()
	var m map[string]any
	Expect(dec.Decode(&m)).To(Succeed())
	return m
}

// setClock moves the REST API's clock.
func setClock(t time.Time) { clock.Store(&t) }

// serverNow is the REST API's time: a spec that declares "tomorrow's" prices takes tomorrow from
// it, not from the wall clock, so that a suite started before midnight and a spec run after it
// agree on which day tomorrow is.
func serverNow() time.Time { return *clock.Load() }

// rewardTx is a ledger transaction at start (zero: none).
func rewardTx(typ flexv1.TransactionType, pence int64, start time.Time) flexv1.RewardTransaction {
	tx := flexv1.RewardTransaction{ID: identity.NewID(), Type: typ, CreditPence: pence}
	if !start.IsZero() {
		tx.StartTime = &metav1.Time{Time: start}
		tx.SettlementDate = start.Format(time.DateOnly)
	}
	return tx
}

// transactionIDs lists the transaction_id of an answer's transactions, in order.
func transactionIDs(body map[string]any) []any {
	txs := body["transactions"].([]any)
	ids := make([]any, 0, len(txs))
	for _, t := range txs {
		ids = append(ids, t.(map[string]any)["transaction_id"])
	}
	return ids
}

var _ = Describe("Rewards", func() {
	const mpan = "1200000000011"
	var (
		o        org
		tok      string
		siteID   string
		siteName string
		base     time.Time
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
		siteID = onboardedSite(tok, mpan)
		siteName = identity.SiteNameForMPAN(mpan)
		previous := *clock.Load()
		DeferCleanup(func() { setClock(previous) })
		base = time.Now().UTC().Truncate(time.Second)
		setClock(base)
	})

	// writeLedger stores the site's ledger straight on the API server, as the rewards
	// pipeline does.
	writeLedger := func(ctx SpecContext, txs ...flexv1.RewardTransaction) *flexv1.RewardLedger {
		GinkgoHelper()
		ledger := &flexv1.RewardLedger{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: identity.RewardLedgerName(siteName)},
			Spec:       flexv1.RewardLedgerSpec{SiteName: siteName, Transactions: txs},
		}
		Expect(k8sClient.Create(ctx, ledger)).To(Succeed())
		// The REST API reads ledgers from its cache.
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/rewards/"+siteID+"/transactions?limit=1000", tok, nil)["transactions"]
		}).Should(HaveLen(len(txs)))
		// /info reads the ledger's summary, which its controller writes after it ingests (the
		// page above reads the database): wait until the REST API's cache holds that summary.
		summarised := &flexv1.RewardLedger{}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ledger), summarised)).To(Succeed())
			g.Expect(summarised.Status.ObservedGeneration).To(Equal(summarised.Generation))
			g.Expect(summarised.Status.TransactionCount).To(HaveValue(BeEquivalentTo(len(txs))))
			g.Expect(summarised.Status.TotalEarnedPence).NotTo(BeNil())
		}).Should(Succeed())
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/rewards/"+siteID+"/info", tok, nil)["total_earnings_pence"]
		}).Should(BeNumerically("==", *summarised.Status.TotalEarnedPence))
		return ledger
	}
	transactions := func(query string) map[string]any {
		GinkgoHelper()
		return exactCall("GET", "/rewards/"+siteID+"/transactions"+query, tok)
	}
	info := func() map[string]any {
		GinkgoHelper()
		return exactCall("GET", "/rewards/"+siteID+"/info", tok)
	}

	It("reports an empty history and the whole wait for a site without a ledger", func() {
		Expect(transactions("")).To(Equal(map[string]any{
			"site_id":                          siteID,
			"transactions":                     []any{},
			"is_below_withdrawal_minimum":      true,
			"days_until_minimum_wait_time_met": json.Number("30"),
		}))
		Expect(info()).To(Equal(map[string]any{
			"current_balance_pence":              json.Number("0"),
			"total_earnings_pence":               json.Number("0"),
			"minimum_withdrawal_threshold_pence": json.Number("1000"),
			"withdrawal_min_wait_days":           json.Number("30"),
			"can_withdraw":                       false,
		}))
	})

	It("lists the ledger newest first with exact fields, and totals it", func(ctx SpecContext) {
		bonus := rewardTx("signup bonus", 500, base.Add(-40*24*time.Hour))
		older := rewardTx("flex event", 300, base.Add(-20*24*time.Hour))
		older.EndTime = &metav1.Time{Time: older.StartTime.Add(2 * time.Hour)}
		older.SettlementDate = base.Add(-18 * 24 * time.Hour).Format(time.DateOnly)
		older.FlexWh = ptr.To[int64](1234)
		newer := rewardTx("flex event", 700, base.Add(-5*24*time.Hour))
		newer.EndTime = &metav1.Time{Time: newer.StartTime.Add(30 * time.Minute)}
		newer.FlexWh = ptr.To[int64](-250)
		withdrawal := rewardTx("withdrawal", -400, base.Add(-2*24*time.Hour))
		withdrawal.PaymentStatus = "pending_approval"
		// Stored out of order: the answer sorts.
		writeLedger(ctx, older, withdrawal, bonus, newer)

		body := transactions("")
		Expect(body["site_id"]).To(Equal(siteID))
		Expect(transactionIDs(body)).To(Equal([]any{withdrawal.ID, newer.ID, older.ID, bonus.ID}))
		txs := body["transactions"].([]any)
		rfc := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
		Expect(txs[2]).To(Equal(map[string]any{
			"transaction_id":   older.ID,
			"credit_pence":     json.Number("300"),
			"transaction_type": "flex event",
			"start_time":       rfc(older.StartTime.Time),
			"end_time":         rfc(older.EndTime.Time),
			"settlement_date":  base.Add(-18 * 24 * time.Hour).Format(time.DateOnly),
			"flex_kwh":         json.Number("1.234"),
		}))
		Expect(txs[1].(map[string]any)["flex_kwh"]).To(Equal(json.Number("-0.25")))
		Expect(txs[0]).To(HaveKeyWithValue("transaction_type", "withdrawal"))
		Expect(txs[0]).To(HaveKeyWithValue("credit_pence", json.Number("-400")))
		Expect(txs[0]).To(HaveKeyWithValue("payment_status", "pending_approval"))
		Expect(txs[0]).To(HaveKeyWithValue("start_time", rfc(withdrawal.StartTime.Time)))
		Expect(txs[0]).To(HaveKeyWithValue("settlement_date", withdrawal.SettlementDate))
		Expect(txs[3]).To(HaveKeyWithValue("transaction_type", "signup bonus"))
		Expect(txs[3]).To(HaveKeyWithValue("credit_pence", json.Number("500")))
		for _, t := range txs {
			Expect(t).To(HaveKeyWithValue("transaction_id", MatchRegexp(uuidPattern)))
			start, err := time.Parse(time.RFC3339, t.(map[string]any)["start_time"].(string))
			Expect(err).NotTo(HaveOccurred())
			Expect(start.Location()).To(Equal(time.UTC))
		}
		// 1100 in hand (above the 1000 minimum), the first reward 40 days back: withdrawable.
		Expect(body["is_below_withdrawal_minimum"]).To(BeFalse())
		Expect(body["days_until_minimum_wait_time_met"]).To(Equal(json.Number("0")))
		Expect(info()).To(Equal(map[string]any{
			"current_balance_pence":              json.Number("1100"),
			"total_earnings_pence":               json.Number("1500"),
			"minimum_withdrawal_threshold_pence": json.Number("1000"),
			"withdrawal_min_wait_days":           json.Number("30"),
			"can_withdraw":                       true,
		}))
	})

	It("counts the withdrawal wait from the first reward, on the REST API's clock", func(ctx SpecContext) {
		first := base.Add(-10 * 24 * time.Hour)
		// A withdrawal and a negative correction earlier still do not start the wait.
		writeLedger(ctx,
			rewardTx("withdrawal", -100, base.Add(-60*24*time.Hour)),
			rewardTx("correction", -50, base.Add(-50*24*time.Hour)),
			rewardTx("flex period", 1200, first),
			rewardTx("goodwill credit", 150, base.Add(-1*24*time.Hour)),
		)
		body := transactions("")
		Expect(body["is_below_withdrawal_minimum"]).To(BeFalse())
		Expect(body["days_until_minimum_wait_time_met"]).To(Equal(json.Number("20")))
		balance := info()
		Expect(balance["current_balance_pence"]).To(Equal(json.Number("1200")))
		Expect(balance["total_earnings_pence"]).To(Equal(json.Number("1350")))
		Expect(balance["can_withdraw"]).To(BeFalse(), "the wait is not over")

		setClock(first.Add(30*24*time.Hour - time.Second))
		Expect(transactions("")["days_until_minimum_wait_time_met"]).To(Equal(json.Number("1")))
		Expect(info()["can_withdraw"]).To(BeFalse())

		setClock(first.Add(30 * 24 * time.Hour))
		Expect(transactions("")["days_until_minimum_wait_time_met"]).To(Equal(json.Number("0")))
		Expect(info()["can_withdraw"]).To(BeTrue())
	})

	It("does not let a balance below the minimum withdraw, however long the wait", func(ctx SpecContext) {
		writeLedger(ctx,
			rewardTx("signup bonus", 500, base.Add(-40*24*time.Hour)),
			rewardTx("flex event", 499, base.Add(-3*24*time.Hour)),
		)
		body := transactions("")
		Expect(body["is_below_withdrawal_minimum"]).To(BeTrue())
		Expect(body["days_until_minimum_wait_time_met"]).To(Equal(json.Number("0")))
		balance := info()
		Expect(balance["current_balance_pence"]).To(Equal(json.Number("999")))
		Expect(balance["can_withdraw"]).To(BeFalse())
	})

	It("ingests transactions added to the ledger's spec, and keeps them when the ledger goes", func(ctx SpecContext) {
		ledger := writeLedger(ctx, rewardTx("signup bonus", 500, base.Add(-40*24*time.Hour)))
		latest := &flexv1.RewardLedger{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ledger), latest)).To(Succeed())
		topUp := rewardTx("flex period top-up", 600, base.Add(-24*time.Hour))
		latest.Spec.Transactions = append(latest.Spec.Transactions, topUp)
		Expect(k8sClient.Update(ctx, latest)).To(Succeed())
		Eventually(func() any { return transactionIDs(transactions("")) }).
			Should(Equal([]any{topUp.ID, ledger.Spec.Transactions[0].ID}))
		Expect(info()["current_balance_pence"]).To(Equal(json.Number("1100")))
		Expect(info()["can_withdraw"]).To(BeTrue())

		// The history is the database's: deleting the ledger (an inbox and a summary) loses
		// nothing, and the controller makes the site's ledger again for its summary.
		Expect(k8sClient.Delete(ctx, latest)).To(Succeed())
		Eventually(func(g Gomega) {
			again := &flexv1.RewardLedger{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ledger), again)).To(Succeed())
			g.Expect(again.UID).NotTo(Equal(latest.UID))
			g.Expect(again.Status.TransactionCount).To(HaveValue(BeEquivalentTo(2)))
			g.Expect(again.Status.BalancePence).To(HaveValue(BeEquivalentTo(1100)))
		}).Should(Succeed())
		Expect(transactionIDs(transactions(""))).To(Equal([]any{topUp.ID, ledger.Spec.Transactions[0].ID}))
		Expect(info()["current_balance_pence"]).To(Equal(json.Number("1100")))
	})

	It("moves a withdrawal's payment status from the ledger's spec one allowed step at a time; a step the state machine refuses is a Warning and the Ingested condition, and changes nothing", func(ctx SpecContext) {
		store := &rewardstore.Store{Pool: testDB.Pool}
		key := rewardstore.Site{Namespace: o.Namespace, ID: siteID}
		withdrawal := rewardTx(hh.TransactionWithdrawal, -2000, base.Add(-24*time.Hour))
		withdrawal.PaymentStatus = hh.PaymentPendingApproval
		ledger := writeLedger(ctx, rewardTx("signup bonus", 2000, base.Add(-40*24*time.Hour)), withdrawal)
		Expect(info()["current_balance_pence"]).To(Equal(json.Number("0")))
		setStatus := func(to flexv1.PaymentStatus) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				latest := &flexv1.RewardLedger{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ledger), latest)).To(Succeed())
				latest.Spec.Transactions[1].PaymentStatus = to
				g.Expect(k8sClient.Update(ctx, latest)).To(Succeed())
			}).Should(Succeed())
		}
		ingested := func(g Gomega) *metav1.Condition {
			latest := &flexv1.RewardLedger{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ledger), latest)).To(Succeed())
			g.Expect(latest.Status.ObservedGeneration).To(Equal(latest.Generation))
			c := meta.FindStatusCondition(latest.Status.Conditions, flexv1.IngestedCondition)
			g.Expect(c).NotTo(BeNil())
			return c
		}
		stored := func() flexv1.PaymentStatus {
			GinkgoHelper()
			tx, err := store.Get(ctx, key, withdrawal.ID)
			Expect(err).NotTo(HaveOccurred())
			return tx.PaymentStatus
		}
		refused := func(to flexv1.PaymentStatus, says string, warnings int) {
			GinkgoHelper()
			before, err := store.StatusChanges(ctx, key, withdrawal.ID)
			Expect(err).NotTo(HaveOccurred())
			was := stored()
			setStatus(to)
			Eventually(func(g Gomega) {
				c := ingested(g)
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal(flexv1.ReasonPaymentStatusRefused))
				g.Expect(c.Message).To(And(ContainSubstring(withdrawal.ID), ContainSubstring(says)))
			}).Should(Succeed())
			Eventually(func(g Gomega) int {
				return lifecycleEvents(ctx, g, o.Namespace, flexv1.ReasonPaymentStatusRefused, ledger.Name)
			}).Should(Equal(warnings))
			Expect(stored()).To(Equal(was))
			Expect(store.StatusChanges(ctx, key, withdrawal.ID)).To(Equal(before), "a refused step records nothing")
		}
		moved := func(to flexv1.PaymentStatus) {
			GinkgoHelper()
			setStatus(to)
			Eventually(func(g Gomega) metav1.ConditionStatus { return ingested(g).Status }).Should(Equal(metav1.ConditionTrue))
			Expect(stored()).To(Equal(to))
		}

		refused("posted", "cannot move from pending_approval to posted", 1)
		moved("approved")
		moved("processing")
		moved("failed")
		Eventually(func() any { return info()["current_balance_pence"] }).Should(Equal(json.Number("2000")))
		refused("posted", "failed is final", 2)
		changes, err := store.StatusChanges(ctx, key, withdrawal.ID)
		Expect(err).NotTo(HaveOccurred())
		Expect(changes).To(HaveLen(3))
		Expect(changes[2].Actor).To(Equal("RewardLedger " + o.Namespace + "/" + ledger.Name))
		Expect(info()["current_balance_pence"]).To(Equal(json.Number("2000")), "the money came back once, and stays")
	})

	It("pages with limit and offset, totals staying those of the whole ledger", func(ctx SpecContext) {
		var txs []flexv1.RewardTransaction
		var newestFirst []any
		for day := 1; day <= 5; day++ {
			tx := rewardTx("flex event", 250, base.Add(-time.Duration(day)*24*time.Hour))
			txs = append(txs, tx)
			newestFirst = append(newestFirst, tx.ID)
		}
		writeLedger(ctx, txs...)

		Expect(transactionIDs(transactions(""))).To(Equal(newestFirst))
		for _, c := range []struct {
			query string
			want  []any
		}{
			{"?limit=2", newestFirst[:2]},
			{"?limit=2&offset=2", newestFirst[2:4]},
			{"?limit=2&offset=4", newestFirst[4:]},
			{"?offset=3", newestFirst[3:]},
			{"?limit=1000", newestFirst},
		} {
			body := transactions(c.query)
			Expect(transactionIDs(body)).To(Equal(c.want), c.query)
			Expect(body["is_below_withdrawal_minimum"]).To(BeFalse(), c.query)
			Expect(body["days_until_minimum_wait_time_met"]).To(Equal(json.Number("25")), c.query)
		}
		Expect(transactions("?offset=5")["transactions"]).To(Equal([]any{}))
		Expect(transactions("?limit=3&offset=50")["transactions"]).To(Equal([]any{}))
	})

	DescribeTable("answers bad paging parameters with a 422 on the query",
		func(query string, loc []any, typ string) {
			status, resp := call("GET", "/rewards/"+siteID+"/transactions?"+query, tok, nil)
			expectValidationItem(status, resp, loc, typ)
		},
		Entry("limit=0", "limit=0", []any{"query", "limit"}, "greater_than_equal"),
		Entry("limit=1001", "limit=1001", []any{"query", "limit"}, "less_than_equal"),
		Entry("limit=-5", "limit=-5", []any{"query", "limit"}, "greater_than_equal"),
		Entry("limit=abc", "limit=abc", []any{"query", "limit"}, "int_parsing"),
		Entry("limit=2.5", "limit=2.5", []any{"query", "limit"}, "int_parsing"),
		Entry("offset=-1", "offset=-1", []any{"query", "offset"}, "greater_than_equal"),
		Entry("offset=abc", "offset=abc", []any{"query", "offset"}, "int_parsing"),
	)

	It("answers an unknown or malformed site id with 404 and 422", func() {
		for _, path := range []string{"/rewards/00000000-0000-4000-8000-000000000000/transactions",
			"/rewards/00000000-0000-4000-8000-000000000000/info"} {
			status, resp := call("GET", path, tok, nil)
			Expect(status).To(Equal(http.StatusNotFound), "%s: %s", path, resp)
			Expect(resp.Detail()).To(Equal(notFoundSite))
		}
		for _, path := range []string{"/rewards/not-a-uuid/transactions", "/rewards/not-a-uuid/info"} {
			status, resp := call("GET", path, tok, nil)
			expectValidationItem(status, resp, []any{"path", "site_id"}, "")
		}
	})

	It("forgets the rewards of an offboarded site", func(ctx SpecContext) {
		ledger := writeLedger(ctx, rewardTx("signup bonus", 500, base.Add(-40*24*time.Hour)))
		mustCall("POST", "/entities/site/"+siteID+"/offboard-site-and-assets", tok, nil)
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(ledger), &flexv1.RewardLedger{}))
		}).Should(BeTrue())
		Eventually(func() int {
			status, _ := call("GET", "/rewards/"+siteID+"/transactions", tok, nil)
			return status
		}).Should(Equal(http.StatusNotFound))
	})
})

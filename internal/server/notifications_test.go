package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

var _ = Describe("Notification subscriptions", func() {
	It("creates a subscription whose secret is shown once and kept only in a Secret", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		status, resp := call("POST", "/notifications/subscriptions", tok, map[string]any{
			"url": "https://hooks.flexsite.invalid/a", "events": []string{"site.offboarded", "asset.changed", "asset.changed"}})
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		created := resp.Map()
		id := created["id"].(string)
		secret := created["secret"].(string)
		Expect(secret).To(HavePrefix("whsec_"))
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		Expect(err).NotTo(HaveOccurred())
		Expect(len(key)).To(BeNumerically(">=", 24))
		Expect(created["events"]).To(Equal([]any{"site.offboarded", "asset.changed"}))
		Expect(created["created_at"]).NotTo(BeEmpty())

		By("the Subscription names a Secret and carries no secret")
		sub := &flexv1.Subscription{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: id}, sub)).To(Succeed())
		raw, _ := json.Marshal(sub)
		Expect(string(raw)).NotTo(ContainSubstring(strings.TrimPrefix(secret, "whsec_")))
		sec := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: sub.Spec.SecretRef.Name}, sec)).To(Succeed())
		Expect(string(sec.Data[sub.Spec.SecretRef.Key])).To(Equal(secret))

		By("reads never show the secret")
		Eventually(func(g Gomega) []any {
			return mustCallG(g, "GET", "/notifications/subscriptions", tok, nil)["subscriptions"].([]any)
		}).Should(HaveLen(1))
		_, list := call("GET", "/notifications/subscriptions", tok, nil)
		Expect(string(list)).NotTo(ContainSubstring(strings.TrimPrefix(secret, "whsec_")))
		got := mustCall("GET", "/notifications/subscriptions/"+id, tok, nil)
		Expect(got).To(Equal(map[string]any{"id": id, "url": "https://hooks.flexsite.invalid/a",
			"events": []any{"site.offboarded", "asset.changed"}, "paused": false, "last_delivery": nil,
			"consecutive_failures": float64(0)}))
		Expect(mustCall("GET", "/notifications/subscriptions/"+id+"/deliveries?limit=5", tok, nil)).To(Equal(
			map[string]any{"deliveries": []any{}}))

		By("a test ping is written to the outbox, for this subscription alone")
		status, resp = call("POST", "/notifications/subscriptions/"+id+"/test", tok, nil)
		Expect(status).To(Equal(http.StatusAccepted), "%s", resp)
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: id}, sub)).To(Succeed())
		pings := outboxEvents(ctx, o.Namespace, flexv1.EventPing)
		Expect(pings).To(HaveLen(1))
		Expect(pings[0].ID).To(Equal(resp.Map()["event_id"]))
		Expect(pings[0].SubscriptionUID).To(Equal(string(sub.UID)))

		By("another organisation sees none of it")
		other := newOrg(ctx).token()
		for _, path := range []string{"", "/deliveries"} {
			status, _ = call("GET", "/notifications/subscriptions/"+id+path, other, nil)
			Expect(status).To(Equal(http.StatusNotFound))
		}
		Expect(mustCall("GET", "/notifications/subscriptions", other, nil)["subscriptions"]).To(BeEmpty())

		By("deleting it deletes its Secret")
		status, _ = call("DELETE", "/notifications/subscriptions/"+id, tok, nil)
		Expect(status).To(Equal(http.StatusNoContent))
		Eventually(func() int {
			status, _ := call("GET", "/notifications/subscriptions/"+id, tok, nil)
			return status
		}).Should(Equal(http.StatusNotFound))
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: sub.Spec.SecretRef.Name}, sec)).NotTo(Succeed())
	})

	It("refuses what it cannot deliver to, in the usual 422 form", func(ctx SpecContext) {
		tok := newOrg(ctx).token()
		for body, loc := range map[string][]any{
			`{"url":"http://hooks.flexsite.invalid/"}`:                    {"body", "url"},
			`{"url":"https://user:pw@hooks.flexsite.invalid/"}`:           {"body", "url"},
			`{"url":"https://hooks.flexsite.invalid/","events":["nope"]}`: {"body", "events", float64(0)},
			`{"events":[]}`: {"body", "url"},
			// Addresses no delivery may reach (issue 27): refused at once, not at each delivery.
			`{"url":"https://[fe80::fc:ff:fe00:1%25eth0]:18443/x"}`: {"body", "url"},
			`{"url":"https://192.0.2.10/x"}`:                        {"body", "url"},
			`{"url":"https://[64:ff9b::a9fe:a9fe]/x"}`:              {"body", "url"},
			`{"url":"https://[2002:a9fe:a9fe::1]/x"}`:               {"body", "url"},
			`{"url":"https://[::a9fe:a9fe]/x"}`:                     {"body", "url"},
			`{"url":"https://169.254.169.254/latest/meta-data"}`:    {"body", "url"},
			`{"url":"https://127.0.0.1:8443/x"}`:                    {"body", "url"},
		} {
			status, resp := call("POST", "/notifications/subscriptions", tok, raw(body))
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s: %s", body, resp)
			Expect(resp.Map()["detail"].([]any)[0].(map[string]any)["loc"]).To(Equal(loc), body)
		}
		for _, path := range []string{"/notifications/subscriptions/unknown", "/notifications/subscriptions/NOT_A_NAME/deliveries"} {
			status, _ := call("GET", path, tok, nil)
			Expect(status).To(Equal(http.StatusNotFound), path)
		}
		status, _ := call("GET", "/notifications/subscriptions/x/deliveries?limit=0", tok, nil)
		Expect(status).To(Equal(http.StatusUnprocessableEntity))
	})
})

// outboxEvent is an event of the notification outbox (PostgreSQL).
type outboxEvent struct {
	ID, Data, SubscriptionUID string
}

// outboxEvents are an organisation's events of type t in the outbox, in the order written.
func outboxEvents(ctx context.Context, ns string, t flexv1.EventType) []outboxEvent {
	rows, err := testDB.Pool.Query(ctx, `SELECT event_id, payload::text, coalesce(subscription_uid, '') FROM outbox
		WHERE organisation = $1 AND event_type = $2 ORDER BY id`, ns, string(t))
	Expect(err).NotTo(HaveOccurred())
	var out []outboxEvent
	var e outboxEvent
	_, err = pgx.ForEachRow(rows, []any{&e.ID, &e.Data, &e.SubscriptionUID}, func() error {
		out = append(out, e)
		return nil
	})
	Expect(err).NotTo(HaveOccurred())
	return out
}

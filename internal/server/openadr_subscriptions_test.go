package server_test

import (
	"encoding/json"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
)

// The OpenADR door's subscriptions (docs/openadr.md, "Subscriptions"): notification
// subscriptions of the organisation, a VEN client's its own, the bearer token kept in the
// subscription's Secret and never answered; the callback URL held to the REST API's rules.
var _ = Describe("The OpenADR door: subscriptions", func() {
	It("keeps a VEN client's subscriptions its own, its bearer token in a Secret, and refuses what it cannot deliver to", func(ctx SpecContext) {
		o := newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite)
		other := newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite)
		venClient := org{Namespace: o.Namespace, Username: o.Username + "-ven", Password: o.Password + "-ven"}
		ven2Client := org{Namespace: o.Namespace, Username: o.Username + "-ven2", Password: o.Password + "-ven2"}
		for _, c := range []org{venClient, ven2Client} {
			Expect(bootstrap.EnsureOrganisation(ctx, k8sClient, bootstrap.Organisation{Namespace: c.Namespace,
				Username: c.Username, Password: c.Password, Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite}})).To(Succeed())
		}
		bl, ven, ven2, otherBL := o.oadrToken(), venClient.oadrToken(), ven2Client.oadrToken(), other.oadrToken()
		body := func(callback string) map[string]any {
			return map[string]any{"clientName": "ven-1", "programID": "limited_pause", "objectOperations": []any{map[string]any{
				"objects": []any{"EVENT"}, "operations": []any{"CREATE", "DELETE"}, "callbackUrl": callback,
				"bearerToken": "ven-secret-token"}}}
		}
		countSubs := func() int {
			GinkgoHelper()
			list := &flexv1.SubscriptionList{}
			Expect(k8sClient.List(ctx, list)).To(Succeed())
			n := 0
			for _, s := range list.Items {
				if s.Namespace == o.Namespace {
					n++
				}
			}
			return n
		}

		By("refusing bad input and addresses no delivery may reach with a 400 problem, nothing written")
		good := body("https://hooks.flexsite.invalid/oadr")
		with := func(key string, v any) map[string]any {
			out := map[string]any{}
			for k, x := range good {
				out[k] = x
			}
			out[key] = v
			return out
		}
		op := func(field string, v any) map[string]any {
			entry := map[string]any{}
			for k, x := range good["objectOperations"].([]any)[0].(map[string]any) {
				entry[k] = x
			}
			entry[field] = v
			return with("objectOperations", []any{entry})
		}
		for _, bad := range []any{
			op("callbackUrl", "http://hooks.flexsite.invalid/oadr"),
			op("callbackUrl", "https://127.0.0.1:8443/x"),
			op("callbackUrl", "https://169.254.169.254/latest/meta-data"),
			op("callbackUrl", "https://user:pw@hooks.flexsite.invalid/"),
			op("objects", []any{"EVENT", "NOPE"}),
			op("operations", []any{}),
			op("bearerToken", "two words"),
			with("objectOperations", []any{}),
			with("objectOperations", append(good["objectOperations"].([]any), good["objectOperations"].([]any)[0])),
			with("programID", "free_money"),
			with("clientName", ""),
			with("targets", []any{map[string]any{"type": "VEN_NAME", "values": []any{"ven-1"}}}),
			`{"clientName": "ven-1", "objectOperations": [`,
		} {
			status, resp := oadrCall("POST", "/subscriptions", ven, bad)
			Expect(status).To(Equal(http.StatusBadRequest), "%v: %s", bad, resp)
		}
		Expect(countSubs()).To(BeZero(), "nothing written")

		By("creating one: 201 without the token; the token only in the subscription's Secret")
		status, created := oadrCall("POST", "/subscriptions", ven, good)
		Expect(status).To(Equal(http.StatusCreated), "%s", created)
		Expect(string(created)).NotTo(ContainSubstring("ven-secret-token"))
		id := created.Map()["id"].(string)
		Expect(created.Map()).To(HaveKeyWithValue("clientName", "ven-1"))
		sub := &flexv1.Subscription{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: id}, sub)).To(Succeed())
		raw, err := json.Marshal(sub)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(raw)).NotTo(ContainSubstring("ven-secret-token"))
		Expect(sub.Spec.Events).To(ConsistOf(flexv1.EventDispatchRequested, flexv1.EventDispatchCancelled))
		Expect(sub.Spec.OpenADR.APIClient).To(Equal(strings.ToLower(venClient.Username)))
		sec := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: sub.Spec.SecretRef.Name}, sec)).To(Succeed())
		Expect(string(sec.Data[sub.Spec.OpenADR.BearerTokenKey])).To(Equal("ven-secret-token"))

		By("its maker and the business logic see it; another VEN client and another organisation do not")
		_, mine := oadrCall("POST", "/subscriptions", bl, with("clientName", "business-logic"))
		blID := mine.Map()["id"].(string)
		expectIDs := func(token, query string, want OmegaMatcher) {
			GinkgoHelper()
			Eventually(func(g Gomega) []string {
				status, body := oadrCallG(g, "GET", "/subscriptions"+query, token, nil)
				g.Expect(status).To(Equal(http.StatusOK))
				var subs []map[string]any
				g.Expect(json.Unmarshal(body, &subs)).To(Succeed())
				out := make([]string, 0, len(subs))
				for _, s := range subs {
					out = append(out, s["id"].(string))
				}
				return out
			}).Should(want)
		}
		expectIDs(bl, "", ConsistOf(id, blID))
		expectIDs(ven, "", ConsistOf(id))
		expectIDs(ven2, "", BeEmpty())
		expectIDs(otherBL, "", BeEmpty())
		expectIDs(bl, "?clientName=ven-1", ConsistOf(id))
		expectIDs(bl, "?programID=price_curve", BeEmpty())
		for _, tc := range []struct{ method, token string }{{"GET", ven2}, {"GET", otherBL}, {"DELETE", ven2}, {"DELETE", otherBL}} {
			status, resp := oadrCall(tc.method, "/subscriptions/"+id, tc.token, nil)
			Expect(status).To(Equal(http.StatusNotFound), "%s: %s", tc.method, resp)
		}
		status, resp := oadrCall("PUT", "/subscriptions/"+id, ven2, good)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)

		By("its maker updates it: a new callback, no token")
		update := body("https://hooks2.flexsite.invalid/oadr")
		delete(update["objectOperations"].([]any)[0].(map[string]any), "bearerToken")
		status, resp = oadrCall("PUT", "/subscriptions/"+id, ven, update)
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Expect(resp.Map()["objectOperations"].([]any)[0]).To(HaveKeyWithValue("callbackUrl", "https://hooks2.flexsite.invalid/oadr"))
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: id}, sub)).To(Succeed())
		Expect(sub.Spec.OpenADR.BearerTokenKey).To(BeEmpty())
		Expect(sub.Spec.OpenADR.APIClient).To(Equal(strings.ToLower(venClient.Username)), "its maker stays its owner")
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: sub.Spec.SecretRef.Name}, sec)).To(Succeed())
		Expect(sec.Data).NotTo(HaveKey("bearerToken"))

		By("the business logic deletes it, and its Secret goes with it")
		status, resp = oadrCall("DELETE", "/subscriptions/"+id, bl, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Eventually(func(g Gomega) {
			status, _ := oadrCallG(g, "GET", "/subscriptions/"+id, ven, nil)
			g.Expect(status).To(Equal(http.StatusNotFound))
		}).Should(Succeed())
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: sub.Spec.SecretRef.Name}, sec)).NotTo(Succeed())
	})
})

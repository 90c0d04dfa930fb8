package delivery_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/testenv"
)

// oadrNotification is one notification an OpenADR callback received.
type oadrNotification struct {
	Authorization string
	Body          map[string]any
}

// oadrReceiver is an OpenADR VEN's callback: an HTTPS receiver on loopback that keeps what
// it is sent.
type oadrReceiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []oadrNotification
}

func newOADRReceiver() *oadrReceiver {
	r := &oadrReceiver{}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		data, _ := io.ReadAll(req.Body)
		var body map[string]any
		_ = json.Unmarshal(data, &body)
		r.mu.Lock()
		r.got = append(r.got, oadrNotification{Authorization: req.Header.Get("Authorization"), Body: body})
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	DeferCleanup(r.Close)
	return r
}

func (r *oadrReceiver) all() []oadrNotification {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]oadrNotification(nil), r.got...)
}

// oadrToken is an OpenADR client-credentials token of the organisation's client.
func oadrToken(o bootstrap.Organisation) string {
	var tok string
	Eventually(func(g Gomega) {
		status, body, err := testenv.Call(apiServer.URL, "POST", oadr.BasePath+"/auth/token", "",
			testenv.Form{"grant_type": "client_credentials", "client_id": o.Username, "client_secret": o.Password})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK), "%s", body)
		var resp map[string]any
		g.Expect(json.Unmarshal(body, &resp)).To(Succeed())
		tok = resp["access_token"].(string)
	}).Should(Succeed())
	return tok
}

var _ = Describe("OpenADR subscriptions", func() {
	It("deliver the document's notification of each event their VEN sees, with its bearer token, in order per site", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		venClient := bootstrap.Organisation{Namespace: ns, Username: "ven-" + ns, Password: "ven-password-" + ns,
			Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite}}
		Expect(bootstrap.EnsureOrganisation(ctx, k8sClient, venClient)).To(Succeed())
		ven := oadrToken(venClient)
		venID := uuid.New()
		_, err := testDB.Pool.Exec(ctx, `INSERT INTO openadr_vens (organisation, id, client_name, ven_name) VALUES ($1, $2, $3, 'ven-1')`,
			ns, venID, strings.ToLower(venClient.Username))
		Expect(err).NotTo(HaveOccurred())
		_, err = testDB.Pool.Exec(ctx, `INSERT INTO openadr_resources (organisation, id, ven_id, resource_name) VALUES ($1, $2, $3, 'asset-held')`,
			ns, uuid.New(), venID)
		Expect(err).NotTo(HaveOccurred())

		r := newOADRReceiver()
		status, data, err := testenv.Call(apiServer.URL, "POST", oadr.BasePath+"/subscriptions", ven, map[string]any{
			"clientName": "ven-1", "programID": "limited_pause", "objectOperations": []any{map[string]any{
				"objects": []any{"EVENT"}, "operations": []any{"CREATE", "DELETE"}, "callbackUrl": r.URL,
				"bearerToken": "ven-callback-token"}}})
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusCreated), "%s", data)
		var created map[string]any
		Expect(json.Unmarshal(data, &created)).To(Succeed())
		sub := &flexv1.Subscription{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: created["id"].(string)}, sub)).To(Succeed())
		ready(ctx, sub)

		By("a flex event's dispatches to the asset the VEN holds and to one it does not, at one site; then its cancellation")
		store := &dispatchstore.Store{Pool: testDB.Pool}
		start := time.Now().UTC().Truncate(30 * time.Minute).Add(2 * time.Hour)
		d := func(asset string) dispatchstore.Dispatch {
			return dispatchstore.Dispatch{FlexEvent: "fe-1", SiteID: "site-1", AssetID: asset, MarketID: "limited_pause",
				Proposition: "limited_pause", LevelKW: 0, From: start, To: start.Add(time.Hour), EventTimestamp: start.Add(-time.Hour)}
		}
		_, err = store.Issue(ctx, ns, apiServer.URL, []dispatchstore.Dispatch{d("asset-held"), d("asset-other")}, nil, time.Now())
		Expect(err).NotTo(HaveOccurred())
		held := dispatch.EventID(ns, "fe-1", "asset-held").String()

		Eventually(r.all).Should(HaveLen(1))
		first := r.all()[0]
		Expect(first.Authorization).To(Equal("Bearer ven-callback-token"))
		Expect(first.Body).To(HaveKeyWithValue("objectType", "EVENT"))
		Expect(first.Body).To(HaveKeyWithValue("operation", "POST"))
		status, got, err := testenv.Call(apiServer.URL, "GET", oadr.BasePath+"/events/"+held, ven, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusOK), "%s", got)
		var event map[string]any
		Expect(json.Unmarshal(got, &event)).To(Succeed())
		Expect(first.Body["object"]).To(Equal(event), "the object is the event as GET /events/{id} answers it")
		Expect(first.Body["targets"]).To(Equal(event["targets"]))

		_, err = store.Cancel(ctx, ns, "fe-1", time.Now())
		Expect(err).NotTo(HaveOccurred())
		Eventually(r.all).Should(HaveLen(2))
		second := r.all()[1]
		Expect(second.Authorization).To(Equal("Bearer ven-callback-token"))
		Expect(second.Body).To(HaveKeyWithValue("operation", "DELETE"))
		Expect(second.Body["object"]).To(HaveKeyWithValue("id", held))

		By("nothing of the asset it does not hold reaches it, and nothing is left pending")
		Eventually(func() (int, error) { return pendingDeliveries(context.WithoutCancel(ctx), ns) }).Should(BeZero())
		// Nothing pending: no deliverer can POST again, so the receiver's two are all it gets.
		Expect(r.all()).To(HaveLen(2))
	})
})

package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
)

// venClient is another API client of o's organisation holding roles (a VEN client when they
// leave out flex_events_write).
func (o org) venClient(ctx context.Context, name string, roles ...flexv1.Role) org {
	GinkgoHelper()
	c := org{Namespace: o.Namespace, Username: o.Username + "-" + name, Password: o.Password + "-" + name}
	Expect(bootstrap.EnsureOrganisation(ctx, k8sClient, bootstrap.Organisation{Namespace: c.Namespace,
		Username: c.Username, Password: c.Password, Roles: roles})).To(Succeed())
	return c
}

// oadrCreated posts body to path and answers the created object (201).
func oadrCreated(path, token string, body any) map[string]any {
	GinkgoHelper()
	status, resp := oadrCall("POST", path, token, body)
	Expect(status).To(Equal(http.StatusCreated), "POST %s: %s", path, resp)
	return resp.Map()
}

// oadrList answers a search's objects.
func oadrList(path, token string) []map[string]any {
	GinkgoHelper()
	status, resp := oadrCall("GET", path, token, nil)
	Expect(status).To(Equal(http.StatusOK), "GET %s: %s", path, resp)
	var out []map[string]any
	Expect(json.Unmarshal(resp, &out)).To(Succeed())
	return out
}

func field(objs []map[string]any, key string) []any {
	out := make([]any, len(objs))
	for i, o := range objs {
		out[i] = o[key]
	}
	return out
}

// rowsOf counts the organisation's rows of an OpenADR table.
func rowsOf(ctx context.Context, table, ns string) int {
	GinkgoHelper()
	var n int
	Expect(testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE organisation = $1`, ns).Scan(&n)).To(Succeed())
	return n
}

var _ = Describe("The OpenADR door: VENs and resources", Ordered, func() {
	var (
		o, other                   org
		logic, venA, venB, otherTk string
		chargerID, batteryID       string
		otherAssetID               string
	)
	mpan := validMPAN(5201)
	BeforeAll(func(ctx SpecContext) {
		needDatabase()
		o = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite)
		other = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite)
		a := o.venClient(ctx, "ven-a", flexv1.RoleEntityRead, flexv1.RoleEntityWrite)
		b := o.venClient(ctx, "ven-b", flexv1.RoleEntityRead, flexv1.RoleEntityWrite)
		logic, venA, venB, otherTk = o.oadrToken(), a.oadrToken(), b.oadrToken(), other.oadrToken()
		tok := o.token()
		onboardedSite(tok, mpan)
		chargerID = mustCall("GET", "/entities/asset/external-id/charger-"+mpan, tok, nil)["id"].(string)
		batteryID = mustCall("GET", "/entities/asset/external-id/battery-"+mpan, tok, nil)["id"].(string)
		otherTok := other.token()
		onboardedSite(otherTok, mpan)
		otherAssetID = mustCall("GET", "/entities/asset/external-id/charger-"+mpan, otherTok, nil)["id"].(string)
	})

	It("registers VENs: venName once in the organisation, each client's own, the business logic sees all, another organisation none", func() {
		venAObj := oadrCreated("/vens", venA, map[string]any{"venName": "ven-a"})
		Expect(venAObj).To(HaveKeyWithValue("objectType", "VEN"))
		Expect(venAObj["id"]).To(MatchRegexp(`^[0-9a-f-]{36}$`))
		Expect(venAObj).To(HaveKey("createdDateTime"))
		Expect(venAObj).To(HaveKey("modificationDateTime"))
		idA := venAObj["id"].(string)

		By("venName is unique in the organisation, whichever client asks: 409")
		for _, tok := range []string{venA, venB, logic} {
			status, body := oadrCall("POST", "/vens", tok, map[string]any{"venName": "ven-a"})
			Expect(status).To(Equal(http.StatusConflict), "%s", body)
			Expect(body.Map()["detail"]).To(ContainSubstring("ven-a"))
		}
		By("another organisation's venName is its own")
		oadrCreated("/vens", otherTk, map[string]any{"venName": "ven-a"})

		idB := oadrCreated("/vens", venB, map[string]any{"venName": "ven-b",
			"targets":    []any{map[string]any{"type": "GROUP", "values": []any{"north", "east"}}},
			"attributes": []any{map[string]any{"type": "DESCRIPTION", "values": []any{"the garage"}}}})["id"].(string)
		idLogic := oadrCreated("/vens", logic, map[string]any{"venName": "ven-logic"})["id"].(string)

		By("each VEN client sees its own VENs; the business logic sees the organisation's")
		Expect(field(oadrList("/vens", venA), "venName")).To(Equal([]any{"ven-a"}))
		Expect(field(oadrList("/vens", venB), "venName")).To(Equal([]any{"ven-b"}))
		Expect(field(oadrList("/vens", logic), "venName")).To(Equal([]any{"ven-a", "ven-b", "ven-logic"}))
		Expect(field(oadrList("/vens?venName=ven-b", logic), "id")).To(Equal([]any{idB}))
		Expect(field(oadrList("/vens?venName=ven-b", venA), "id")).To(BeEmpty())
		Expect(field(oadrList("/vens?targetType=GROUP&targetValues=east", logic), "id")).To(Equal([]any{idB}))
		Expect(field(oadrList("/vens?targetType=GROUP&targetValues=south", logic), "id")).To(BeEmpty())
		Expect(field(oadrList("/vens?targetType=VEN_NAME&targetValues=ven-a,ven-logic", logic), "id")).To(Equal([]any{idA, idLogic}))
		Expect(field(oadrList("/vens?skip=1&limit=1", logic), "id")).To(Equal([]any{idB}))
		Expect(oadrList("/vens", otherTk)).To(HaveLen(1))

		By("another client's VEN, or another organisation's, is not found: 404")
		for _, tc := range []struct{ tok, id string }{{venA, idB}, {venB, idA}, {venA, idLogic}, {otherTk, idA}} {
			for _, method := range []string{"GET", "PUT", "DELETE"} {
				status, body := oadrCall(method, "/vens/"+tc.id, tc.tok, map[string]any{"venName": "taken-over"})
				Expect(status).To(Equal(http.StatusNotFound), "%s: %s", method, body)
			}
		}
		status, _ := oadrCall("GET", "/vens/not-a-uuid", logic, nil)
		Expect(status).To(Equal(http.StatusNotFound))
		status, _ = oadrCall("GET", "/vens/"+idB, logic, nil)
		Expect(status).To(Equal(http.StatusOK))

		By("an update renames, within the same rule; the business logic may change any")
		status, body := oadrCall("PUT", "/vens/"+idA, venA, map[string]any{"venName": "ven-b"})
		Expect(status).To(Equal(http.StatusConflict), "%s", body)
		status, body = oadrCall("PUT", "/vens/"+idA, venA, map[string]any{"venName": "ven-a2",
			"targets": []any{map[string]any{"type": "GROUP", "values": []any{"south"}}}})
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		Expect(body.Map()).To(HaveKeyWithValue("venName", "ven-a2"))
		Expect(body.Map()["createdDateTime"]).To(Equal(venAObj["createdDateTime"]))
		Expect(field(oadrList("/vens?targetType=GROUP&targetValues=south", venA), "id")).To(Equal([]any{idA}))

		status, body = oadrCall("DELETE", "/vens/"+idLogic, logic, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		Expect(body.Map()).To(HaveKeyWithValue("venName", "ven-logic"))
		status, _ = oadrCall("GET", "/vens/"+idLogic, logic, nil)
		Expect(status).To(Equal(http.StatusNotFound))
		status, _ = oadrCall("DELETE", "/vens/"+idB, logic, nil)
		Expect(status).To(Equal(http.StatusOK), "the business logic deletes a VEN client's VEN")
	})

	It("registers the organisation's assets as resources, each held by one VEN at a time, with the asset's type and rating", func(ctx SpecContext) {
		venOfA := oadrCreated("/vens", venA, map[string]any{"venName": "resources-a"})["id"].(string)
		venOfB := oadrCreated("/vens", venB, map[string]any{"venName": "resources-b"})["id"].(string)

		charger := oadrCreated("/vens/"+venOfA+"/resources", venA, map[string]any{"resourceName": chargerID,
			"attributes": []any{map[string]any{"type": "MAX_POWER_CONSUMPTION", "values": []any{99}}}})
		Expect(charger).To(HaveKeyWithValue("objectType", "RESOURCE"))
		Expect(charger).To(HaveKeyWithValue("venID", venOfA))
		Expect(charger["attributes"]).To(ConsistOf(
			map[string]any{"type": "ASSET_TYPE", "values": []any{"charger"}},
			map[string]any{"type": "MAX_POWER_CONSUMPTION", "values": []any{7.4}}), "Flexsite says the asset's rating")
		battery := oadrCreated("/vens/"+venOfA+"/resources", venA, map[string]any{"resourceName": batteryID,
			"attributes": []any{map[string]any{"type": "DESCRIPTION", "values": []any{"garage wall"}}},
			"targets":    []any{map[string]any{"type": "GROUP", "values": []any{"batteries"}}}})
		Expect(battery["attributes"]).To(ConsistOf(
			map[string]any{"type": "ASSET_TYPE", "values": []any{"battery"}},
			map[string]any{"type": "MAX_POWER_CONSUMPTION", "values": []any{5.0}},
			map[string]any{"type": "MAX_POWER_EXPORT", "values": []any{5.0}},
			map[string]any{"type": "DESCRIPTION", "values": []any{"garage wall"}}))
		Expect(string(mustJSON(battery))).NotTo(ContainSubstring(mpan), "nothing of the site or household")

		By("an asset another VEN of the organisation holds: 409; no asset of the organisation: 400 naming resourceName")
		status, body := oadrCall("POST", "/vens/"+venOfB+"/resources", venB, map[string]any{"resourceName": chargerID})
		Expect(status).To(Equal(http.StatusConflict), "%s", body)
		for _, name := range []string{otherAssetID, "no-such-asset", "charger-" + mpan} {
			status, body = oadrCall("POST", "/vens/"+venOfB+"/resources", venB, map[string]any{"resourceName": name})
			Expect(status).To(Equal(http.StatusBadRequest), "%s: %s", name, body)
			Expect(body.Map()["detail"]).To(ContainSubstring("resourceName"))
		}
		Expect(rowsOf(ctx, "openadr_resources", o.Namespace)).To(Equal(2))

		By("searches: by resourceName, by target, paged; another client's VEN's resources are not found")
		path := "/vens/" + venOfA + "/resources"
		Expect(field(oadrList(path, venA), "resourceName")).To(Equal([]any{chargerID, batteryID}))
		Expect(field(oadrList(path+"?resourceName="+batteryID, venA), "id")).To(Equal([]any{battery["id"]}))
		Expect(field(oadrList(path+"?targetType=GROUP&targetValues=batteries", venA), "id")).To(Equal([]any{battery["id"]}))
		Expect(field(oadrList(path+"?targetType=RESOURCE_NAME&targetValues="+chargerID, logic), "id")).To(Equal([]any{charger["id"]}))
		Expect(field(oadrList(path+"?skip=1", venA), "id")).To(Equal([]any{battery["id"]}))
		status, _ = oadrCall("GET", path, venB, nil)
		Expect(status).To(Equal(http.StatusNotFound))
		status, _ = oadrCall("GET", path+"/"+charger["id"].(string), otherTk, nil)
		Expect(status).To(Equal(http.StatusNotFound))
		status, _ = oadrCall("GET", "/vens/"+venOfB+"/resources/"+charger["id"].(string), venB, nil)
		Expect(status).To(Equal(http.StatusNotFound), "a resource under another VEN's path")

		By("an update keeps the rule; a delete releases the asset")
		status, body = oadrCall("PUT", path+"/"+charger["id"].(string), venA, map[string]any{"resourceName": chargerID,
			"targets": []any{map[string]any{"type": "GROUP", "values": []any{"chargers"}}}})
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		Expect(body.Map()["targets"]).To(Equal([]any{map[string]any{"type": "GROUP", "values": []any{"chargers"}}}))
		status, body = oadrCall("PUT", path+"/"+charger["id"].(string), venA, map[string]any{"resourceName": otherAssetID})
		Expect(status).To(Equal(http.StatusBadRequest), "%s", body)
		status, body = oadrCall("DELETE", path+"/"+charger["id"].(string), venA, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		oadrCreated("/vens/"+venOfB+"/resources", venB, map[string]any{"resourceName": chargerID})
		status, body = oadrCall("PUT", path+"/"+battery["id"].(string), venA, map[string]any{"resourceName": chargerID})
		Expect(status).To(Equal(http.StatusConflict), "%s", body)

		By("deleting a VEN releases its resources")
		status, _ = oadrCall("DELETE", "/vens/"+venOfA, venA, nil)
		Expect(status).To(Equal(http.StatusOK))
		oadrCreated("/vens/"+venOfB+"/resources", venB, map[string]any{"resourceName": batteryID})
	})

	It("refuses bad input with a 400 problem and writes nothing", func(ctx SpecContext) {
		ven := oadrCreated("/vens", venA, map[string]any{"venName": "bad-input"})["id"].(string)
		vens, resources := rowsOf(ctx, "openadr_vens", o.Namespace), rowsOf(ctx, "openadr_resources", o.Namespace)
		long := strings.Repeat("x", 129)
		huge := `{"venName": "huge", "attributes": [{"type": "DESCRIPTION", "values": ["` + strings.Repeat("x", 70_000) + `"]}]}`
		for _, tc := range []struct {
			method, path string
			body         any
		}{
			{"POST", "/vens", raw(`{"venName": "broken"`)},
			{"POST", "/vens", raw(`[{"venName": "a list"}]`)},
			{"POST", "/vens", map[string]any{"venName": 5}},
			{"POST", "/vens", map[string]any{"venName": ""}},
			{"POST", "/vens", map[string]any{"venName": long}},
			{"POST", "/vens", map[string]any{"venName": "typed", "objectType": "EVENT"}},
			{"POST", "/vens", map[string]any{"venName": "nulls", "attributes": []any{map[string]any{"type": "X", "values": []any{nil}}}}},
			{"POST", "/vens", map[string]any{"venName": "objects", "targets": []any{map[string]any{"type": "X", "values": []any{map[string]any{"a": 1}}}}}},
			{"POST", "/vens", map[string]any{"venName": "untyped", "targets": []any{map[string]any{"values": []any{"a"}}}}},
			{"POST", "/vens", map[string]any{"venName": "nested", "resources": []any{map[string]any{"resourceName": chargerID}}}},
			{"POST", "/vens", raw(huge)},
			{"POST", "/vens", raw(`{"venName": "deep", "attributes": ` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`)},
			{"PUT", "/vens/" + ven, map[string]any{"venName": []any{"a"}}},
			{"POST", "/vens/" + ven + "/resources", map[string]any{"resourceName": 12}},
			{"POST", "/vens/" + ven + "/resources", map[string]any{"resourceName": chargerID, "venID": "another-ven"}},
			{"POST", "/vens/" + ven + "/resources", raw(`{"resourceName": "` + chargerID + `", "resourceName": "twice"}`)},
		} {
			status, body := oadrCall(tc.method, tc.path, venA, tc.body)
			Expect(status).To(Equal(http.StatusBadRequest), "%s %s %v: %s", tc.method, tc.path, tc.body, body)
		}
		Expect(rowsOf(ctx, "openadr_vens", o.Namespace)).To(Equal(vens))
		Expect(rowsOf(ctx, "openadr_resources", o.Namespace)).To(Equal(resources))
		status, body := oadrCall("GET", "/vens/"+ven, venA, nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(body.Map()).To(HaveKeyWithValue("venName", "bad-input"))
		status, _ = oadrCall("GET", "/vens?limit=51", venA, nil)
		Expect(status).To(Equal(http.StatusBadRequest))
		status, _ = oadrCall("GET", "/vens?venName="+long, venA, nil)
		Expect(status).To(Equal(http.StatusBadRequest))
	})
})

func mustJSON(v any) []byte {
	GinkgoHelper()
	b, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	return b
}

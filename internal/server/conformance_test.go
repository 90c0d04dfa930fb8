package server_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/hostedflow"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/outboxstore"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/testenv"
	"github.com/flexsite/flexsite/internal/web"
)

// contract holds the OpenAPI document the server serves and production's published document
// (internal/restapi/apidocs/testdata, unchanged), compiled: the JSON Schema (2020-12, the
// dialect of OpenAPI 3.1) of each JSON answer of each operation, by status. Clients generate
// code from either and validate answers with it, so every answer must validate against the
// served document, and every answer of one of production's operations against production's
// too, nulls included.
type contract struct {
	served, production *document
	checked            map[string]int // 200 bodies validated against the served document, by operation
	productionChecked  map[string]int // 2xx bodies validated against production's, by its operation
}

// document is one OpenAPI document, compiled.
type document struct {
	name string
	// schemas is the schema of each status's JSON answer, by operation ("GET
	// /entities/site/{site_id}") and then status ("200", "422").
	schemas map[string]map[string]*jsonschema.Schema
	// headers names the response headers documented, by operation and status.
	headers map[string]map[string][]string
	// tolerated are values outside the document's closed enums that Flexsite sends on
	// purpose: the extensions docs/api.md lists among the differences from production. A field
	// that holds one breaks production's schema by design, and only there.
	tolerated map[string]bool
	// omitted are, by operation, members the document requires that Flexsite leaves out on
	// purpose (docs/api.md's differences from production list each).
	omitted map[string][]string
	// compiler and url compile more schemas of the document (substitute).
	compiler *jsonschema.Compiler
	url      string
}

// substitute checks the answers of op with status against another schema of the document
// (a JSON pointer): where Flexsite answers in another of production's forms on purpose.
func (d *document) substitute(op, status, pointer string) {
	GinkgoHelper()
	Expect(d.schemas[op][status]).NotTo(BeNil(), "%s documents no %s body to substitute", op, status)
	sch, err := d.compiler.Compile(d.url + pointer)
	Expect(err).NotTo(HaveOccurred())
	d.schemas[op][status] = sch
}

// productionOmissions are the members production's answers require that Flexsite leaves out
// on purpose, by operation: the offboard answer's first asset, for a site that had none.
var productionOmissions = map[string][]string{"POST /entities/site/{site_id}/offboard-site-and-assets": {"asset"}}

// productionTime is the "time" format as production writes a time of day: HH:MM:SS with
// optional fractions and offset (its framework's). JSON Schema's own (RFC 3339's full-time)
// requires an offset, which a wall time (a tariff's cheap hours, an intent's ready-by) has
// not, in production's answers as in ours; HH:MM alone is not production's and fails.
var productionTime = &jsonschema.Format{Name: "time", Validate: func(v any) error {
	if s, ok := v.(string); ok && !productionTimeOfDay.MatchString(s) {
		return fmt.Errorf("%q is not a time of day HH:MM:SS[.ffffff][Z|±HH:MM]", s)
	}
	return nil
}}

var productionTimeOfDay = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})?$`)

// productionExtensions are the values of the extensions docs/api.md's differences from
// production list: the price_curve proposition and two eligibility issue codes.
var productionExtensions = map[string]bool{"price_curve": true, "asset_type_not_supported": true, "site_details_missing": true}

// servedContract fetches /openapi.json from the running server and reads production's document
// from testdata.
func servedContract() *contract {
	GinkgoHelper()
	status, body := call("GET", "/openapi.json", "", nil)
	Expect(status).To(Equal(http.StatusOK), "%s", body)
	prod, err := os.ReadFile("../restapi/apidocs/testdata/production-openapi-1.4.6.json")
	Expect(err).NotTo(HaveOccurred())
	c := &contract{served: compileDocument("the served document", body),
		production: compileDocument("production's document", prod, productionTime),
		checked:    map[string]int{}, productionChecked: map[string]int{}}
	Expect(c.served.schemas).NotTo(BeEmpty())
	Expect(c.production.schemas).To(HaveLen(55))
	c.production.tolerated = productionExtensions
	c.production.omitted = productionOmissions
	// Production documents POST /entities/site's 422 as {"detail": "a message"}; Flexsite
	// answers malformed input there as on every other operation, in production's
	// HTTPValidationError form (docs/api.md's differences from production).
	c.production.substitute("POST /entities/site", "422", "#/components/schemas/HTTPValidationError")
	return c
}

// compileDocument compiles the schema of every JSON answer (each status, the shared responses
// of components/responses followed) of every operation of an OpenAPI 3.1 document.
func compileDocument(name string, body []byte, formats ...*jsonschema.Format) *document {
	GinkgoHelper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	url := "https://flexsite.invalid/" + strings.ReplaceAll(name, " ", "-") + ".json"
	compiler := jsonschema.NewCompiler()
	compiler.DefaultDraft(jsonschema.Draft2020)
	compiler.AssertFormat() // a uuid or date-time the document promises must be one
	for _, f := range formats {
		compiler.RegisterFormat(f)
	}
	Expect(compiler.AddResource(url, doc)).To(Succeed())

	type answer struct {
		Ref     string                     `json:"$ref"`
		Headers map[string]json.RawMessage `json:"headers"`
		Content map[string]struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"content"`
	}
	var parsed struct {
		Paths map[string]map[string]struct {
			Responses map[string]answer `json:"responses"`
		} `json:"paths"`
		Components struct {
			Responses map[string]answer `json:"responses"`
		} `json:"components"`
	}
	Expect(json.Unmarshal(body, &parsed)).To(Succeed())
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	d := &document{name: name, schemas: map[string]map[string]*jsonschema.Schema{}, headers: map[string]map[string][]string{},
		compiler: compiler, url: url}
	for path, item := range parsed.Paths {
		for method, op := range item {
			switch method {
			case "get", "put", "post", "delete", "patch":
			default:
				continue
			}
			name := strings.ToUpper(method) + " " + path
			d.schemas[name] = map[string]*jsonschema.Schema{}
			d.headers[name] = map[string][]string{}
			for status, a := range op.Responses {
				pointer := "#/paths/" + esc.Replace(path) + "/" + method + "/responses/" + status
				if shared, ok := strings.CutPrefix(a.Ref, "#/components/responses/"); ok {
					a, pointer = parsed.Components.Responses[shared], a.Ref
				}
				d.headers[name][status] = slices.Sorted(maps.Keys(a.Headers))
				if a.Content["application/json"].Schema == nil {
					continue
				}
				sch, err := compiler.Compile(url + pointer + "/content/application~1json/schema")
				Expect(err).NotTo(HaveOccurred(), "compiling %s of %s", pointer, name)
				d.schemas[name][status] = sch
			}
		}
	}
	return d
}

// operation names the operation of d that serves method and path: the one whose path template
// matches with the fewest parameters (/entities/site/onboard before {site_id}); "" if none.
func (d *document) operation(method, path string) string {
	path, _, _ = strings.Cut(path, "?")
	segs := strings.Split(path, "/")
	best, bestParams := "", -1
	for op := range d.schemas {
		m, template, _ := strings.Cut(op, " ")
		tsegs := strings.Split(template, "/")
		if m != method || len(tsegs) != len(segs) {
			continue
		}
		params := 0
		for i, t := range tsegs {
			if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") && segs[i] != "" {
				params++
			} else if t != segs[i] {
				params = -1
				break
			}
		}
		if params >= 0 && (bestParams < 0 || params < bestParams) {
			best, bestParams = op, params
		}
	}
	return best
}

// check validates an answer of op with status against d's schema of that status's JSON
// answer. A body that breaks it fails the spec, naming the operation and each field (instance
// location) and the keyword it broke, unless each broken field holds one of d's tolerated
// values. It reports whether d documents a JSON body there.
func (d *document) check(op string, status int, instance any, resp response) bool {
	GinkgoHelper()
	sch := d.schemas[op][strconv.Itoa(status)]
	if sch == nil {
		return false
	}
	err := sch.Validate(instance)
	if err == nil {
		return true
	}
	var verr *jsonschema.ValidationError
	Expect(errors.As(err, &verr)).To(BeTrue(), "%s: %v", op, err)
	var fields []string
	for _, leaf := range leaves(verr) {
		if value, ok := at(instance, leaf.InstanceLocation).(string); ok && d.tolerated[value] {
			continue
		}
		if required, ok := leaf.ErrorKind.(*kind.Required); ok && len(leaf.InstanceLocation) == 0 &&
			!slices.ContainsFunc(required.Missing, func(m string) bool { return !slices.Contains(d.omitted[op], m) }) {
			continue
		}
		fields = append(fields, fmt.Sprintf("/%s (%s)", strings.Join(leaf.InstanceLocation, "/"),
			strings.Join(leaf.ErrorKind.KeywordPath(), "/")))
	}
	Expect(fields).To(BeEmpty(), "%s: the %d body does not validate against %s:\n  %s\n%v\nbody: %s",
		op, status, d.name, strings.Join(fields, "\n  "), err, resp)
	return true
}

// at is the value at location in a decoded JSON instance (nil if none).
func at(instance any, location []string) any {
	for _, key := range location {
		switch v := instance.(type) {
		case map[string]any:
			instance = v[key]
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(v) {
				return nil
			}
			instance = v[i]
		default:
			return nil
		}
	}
	return instance
}

// leaves are the innermost causes of a validation error: the fields that broke the schema.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// operation names the served document's operation that serves method and path.
func (c *contract) operation(method, path string) string {
	GinkgoHelper()
	op := c.served.operation(method, path)
	Expect(op).NotTo(BeEmpty(), "the served document has no operation for %s %s", method, path)
	return op
}

// call sends a request that must answer 200 and checks the body against the schema the served
// document gives that operation's 200 answer (and production's, for one of its operations). It
// returns the body, decoded.
func (c *contract) call(method, path, token string, body any) map[string]any {
	GinkgoHelper()
	_, resp := c.validated(method, path, token, body)
	return resp.Map()
}

// checkList is call for an operation whose 200 answer is a JSON array (GET /meter/search).
func (c *contract) checkList(method, path, token string) []any {
	GinkgoHelper()
	instance, resp := c.validated(method, path, token, nil)
	list, ok := instance.([]any)
	Expect(ok).To(BeTrue(), "%s %s: not a list: %s", method, path, resp)
	return list
}

// validated sends a request that must answer 200 and checks it (checkAnswer). It returns the
// body decoded as the validator read it and as it came.
func (c *contract) validated(method, path, token string, body any) (any, response) {
	GinkgoHelper()
	status, resp := call(method, path, token, body)
	return c.checkAnswer(method, path, http.StatusOK, status, resp), resp
}

// refused sends a request that must answer want (an error, or a 2xx other than 200) and checks
// its body against each document that documents one for that status. It returns the body.
func (c *contract) refused(method, path, token string, body any, want int) response {
	GinkgoHelper()
	status, resp := call(method, path, token, body)
	c.checkAnswer(method, path, want, status, resp)
	return resp
}

// checkAnswer checks an answer that must have status want: its body against the served
// document's schema of that status (which must document a JSON body for a 200), and, for one of
// production's operations, against production's schema of that status where production documents
// a body. It counts the operation checked in each document.
func (c *contract) checkAnswer(method, path string, want, status int, resp response) any {
	GinkgoHelper()
	op := c.operation(method, path)
	Expect(status).To(Equal(want), "%s (%s): %s", op, path, resp)
	instance, err := jsonschema.UnmarshalJSON(bytes.NewReader(resp))
	Expect(err).NotTo(HaveOccurred(), "%s: %s", op, resp)
	if c.served.check(op, status, instance, resp) && status == http.StatusOK {
		c.checked[op]++
	} else if status == http.StatusOK {
		Fail(fmt.Sprintf("%s: the served document has no JSON 200 answer", op))
	}
	if prodOp := c.production.operation(method, path); prodOp != "" {
		if c.production.check(prodOp, status, instance, resp) && status/100 == 2 {
			c.productionChecked[prodOp]++
		}
	}
	return instance
}

// hosted is call for a route of the hosted flow: the component token's allowed origin (that of
// componentForm) in the header the flow's page sends.
func (c *contract) hosted(method, path, token string, body any) map[string]any {
	GinkgoHelper()
	status, data, err := testenv.CallWithHeaders(apiServer.URL, method, path, token, body,
		map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"})
	Expect(err).NotTo(HaveOccurred())
	resp := response(data)
	c.checkAnswer(method, path, http.StatusOK, status, resp)
	return resp.Map()
}

var _ = Describe("Conformance: every 200 body validates against the served OpenAPI document", Ordered, func() {
	var (
		c   *contract
		o   org
		tok string
		// Sites: a household onboarded with consent, one onboarded through the legacy endpoint
		// (no consent), and an end user's site from the component-token flow (no assets).
		home, legacy, user struct{ mpan, id string }
	)
	const externalUserID = "conformance-user"

	BeforeAll(func(ctx SpecContext) {
		c = servedContract()
		o = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards, flexv1.RoleComponents,
			flexv1.RoleRewardsWrite, flexv1.RoleRewardsAdmin, flexv1.RoleFlexEventsWrite, flexv1.RolePricesWrite)
		tok = o.token()
		home.mpan, legacy.mpan = validMPAN(7001), validMPAN(7002)
	})

	It("serves a document that validates as its own answer", func() {
		c.call("GET", "/openapi.json", "", nil)
	})

	It("answers the auth endpoints as documented", func(ctx SpecContext) {
		c.call("POST", "/auth/token-form", "", form{"username": o.Username, "password": o.Password, "grant_type": "password"})
		c.call("GET", "/auth/users/me/", tok, nil)
		first := c.call("POST", "/auth/component-token", tok,
			componentForm(externalUserID, "gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		again := c.call("POST", "/auth/component-token", tok, componentForm(externalUserID, "user_email", "user@example.com"))
		Expect(again["id"]).To(Equal(first["id"]))
		user.id = userSite(ctx, o.Namespace, externalUserID).Labels[flexv1.IDLabel]
	})

	It("answers onboard, initialise and the legacy onboard as documented", func() {
		body := c.call("POST", "/entities/site/onboard", tok, household(home.mpan))
		home.id = entitySiteID(body)
		Expect(c.call("POST", "/entities/site/onboard", tok, household(home.mpan))["enrolment"]).
			To(HaveKeyWithValue("status", "already_enrolled"))

		By("initialising a new site, then changing the existing one")
		c.call("POST", "/entities/site/initialise", tok, entityInitialiseBody(validMPAN(7003)))
		changed := c.call("POST", "/entities/site/initialise", tok, entityInitialiseBody(home.mpan, func(b map[string]any) {
			b["site"].(map[string]any)["email"] = "moved@example.com"
		}))
		Expect(changed["site"]).To(HaveKeyWithValue("fields_updated", Not(BeEmpty())))

		legacyAnswer := c.call("POST", "/entities/site/onboard-site-and-asset", tok, legacyOnboardBody(legacy.mpan, "legacy-conformance"))
		legacy.id = legacyAnswer["site"].(map[string]any)["id"].(string)
		Expect(legacyAnswer["site"]).NotTo(HaveKey("gave_boundary_meter_consent_at"), "absent, never null, without consent")

		By("creating a site alone (POST /entities/site)")
		c.call("POST", "/entities/site", tok, map[string]any{"mpan": validMPAN(7080), "postcode": "sw1a2aa", "street_address": "1 Conformance Row"})
	})

	It("answers the asset endpoints as documented", func() {
		withProps := c.call("POST", "/entities/asset", tok, createAssetBody(home.id, "conformance-battery"))
		bare := c.call("POST", "/entities/asset", tok,
			map[string]any{"external_id": "conformance-bare", "type": "heat pump", "site_id": home.id})
		Expect(bare["properties"]).To(BeEmpty())
		for _, rec := range []map[string]any{withProps, bare} {
			c.call("GET", "/entities/asset/"+rec["id"].(string), tok, nil)
			c.call("GET", "/entities/asset/external-id/"+rec["external_id"].(string), tok, nil)
		}

		By("updating an asset, changing something and nothing, with and without properties")
		Expect(c.call("PATCH", "/entities/asset/"+bare["id"].(string), tok, map[string]any{"asset_model": "generic_heat_pump"})).
			To(HaveKeyWithValue("properties", BeEmpty()))
		c.call("PATCH", "/entities/asset/"+bare["id"].(string), tok, map[string]any{})
		Expect(c.call("PATCH", "/entities/asset/"+withProps["id"].(string), tok,
			map[string]any{"properties": map[string]any{"power_kw": 3.6}, "installation_date": "2025-04-01"})).
			To(HaveKeyWithValue("properties", HaveKeyWithValue("power_kw", 3.6)))

		By("listing the organisation's assets: a full page, a partial one and one past the end")
		all := c.call("GET", "/entities/asset?limit=100", tok, nil)
		total := int(all["total_num_assets"].(float64))
		Expect(all["assets"]).To(HaveLen(total))
		Expect(c.call("GET", fmt.Sprintf("/entities/asset?limit=2&offset=%d", total-1), tok, nil)["assets"]).To(HaveLen(1))
		Expect(c.call("GET", fmt.Sprintf("/entities/asset?limit=2&offset=%d", total+2), tok, nil)["assets"]).To(BeEmpty())
	})

	It("answers the site endpoints as documented, with and without meter consent", func() {
		Expect(c.call("GET", "/entities/site/"+legacy.id, tok, nil)).NotTo(HaveKey("gave_boundary_meter_consent_at"))
		Expect(c.call("GET", "/entities/site/"+home.id, tok, nil)).
			To(HaveKeyWithValue("gave_boundary_meter_consent_at", Not(BeNil())))
		page := c.call("GET", "/entities/site?limit=100", tok, nil)
		Expect(page["sites"]).To(HaveLen(5)) // home, legacy, user, the initialised one and the one created alone
		c.call("GET", "/entities/site?limit=1&offset=10", tok, nil)

		By("checking eligibility: a site whose assets have issues, and an end user's site without assets")
		c.call("GET", "/entities/site/"+home.id+"/eligibility", tok, nil)
		c.call("GET", "/entities/site/"+user.id+"/eligibility", tok, nil)

		By("changing a site: a field, then its MPAN")
		Expect(c.call("PATCH", "/entities/site/"+home.id, tok, map[string]any{"email": "moved@example.com",
			"tariff": map[string]any{"tariff_type": "dual_rate", "tariff_cheap_start_time": "00:30", "tariff_cheap_end_time": "04:30"}})).
			To(HaveKeyWithValue("id", home.id))
		Expect(c.call("PATCH", "/entities/site/"+home.id, tok, map[string]any{"mpan": validMPAN(7090)})).
			To(HaveKeyWithValue("mpan", validMPAN(7090)))

		Expect(c.call("POST", "/entities/site/"+legacy.id+"/meter-consent", tok,
			map[string]any{"gave_boundary_meter_consent_at": "2026-02-01T09:00:00+01:00"})).
			To(HaveKeyWithValue("gave_boundary_meter_consent_at", "2026-02-01T08:00:00Z"))
	})

	It("answers enrol and unenrol as documented, in each of their outcomes", func() {
		site := entitySiteID(c.call("POST", "/entities/site/initialise", tok, entityInitialiseBody(validMPAN(7004))))
		limitedPause := map[string]any{"proposition": "limited_pause"}
		for _, step := range []struct{ action, status string }{
			{"enrol", "enrolled"}, {"enrol", "already_enrolled"}, {"unenrol", "unenrolled"}, {"unenrol", "already_unenrolled"},
		} {
			Expect(c.call("POST", "/entities/site/"+site+"/"+step.action, tok, limitedPause)).To(HaveKeyWithValue("status", step.status))
		}
	})

	It("answers the site lifecycle operations as documented: check-eligibility, dispatch consent and deconsent", func(ctx SpecContext) {
		By("checking a new MPAN with and without a model, and a stored one with a model that has issues")
		const check = "/entities/site/check-eligibility"
		Expect(c.call("POST", check, tok, map[string]any{"mpan": validMPAN(7005), "asset_model": "zappi"})).
			To(HaveKeyWithValue("propositions", HaveLen(3)))
		c.call("POST", check, tok, map[string]any{"mpan": validMPAN(7005)})
		c.call("POST", check, tok, map[string]any{"mpan": home.mpan, "asset_model": "legacy_charger"})

		By("changing the dispatch consent of sites with and without meter consent, and of an end user's site")
		Expect(c.call("POST", "/entities/site/"+home.id+"/dispatch-consent", tok,
			map[string]any{"dispatch_methods": []any{"limited_pause", "vpp_limited_control"}})).
			To(HaveKeyWithValue("dispatch_methods", []any{"limited_pause", "vpp_limited_control"}))
		c.call("POST", "/entities/site/"+home.id+"/dispatch-deconsent", tok, map[string]any{"dispatch_methods": []any{"limited_pause"}})
		Expect(c.call("POST", "/entities/site/"+legacy.id+"/dispatch-consent", tok, map[string]any{"dispatch_methods": []any{}})).
			To(HaveKeyWithValue("dispatch_methods", []any{"cm_infrequent_dispatch", "limited_pause"}))
		c.call("POST", "/entities/site/"+user.id+"/dispatch-deconsent", tok,
			map[string]any{"dispatch_methods": []any{"cm_infrequent_dispatch"}})

		// The Site controller writes the status of the changed sites: let it finish before the
		// specs after this one update them.
		Eventually(func(g Gomega) {
			sites := &flexv1.SiteList{}
			g.Expect(k8sClient.List(ctx, sites, client.InNamespace(o.Namespace))).To(Succeed())
			for _, site := range sites.Items {
				g.Expect(site.Status.ObservedGeneration).To(Equal(site.Generation), "site %s", site.Name)
			}
		}).Should(Succeed())
	})

	It("answers the MPAN validation as documented", func(ctx SpecContext) {
		ensureMeterRegister(ctx)
		c.call("POST", "/validation/mpan", tok, map[string]any{"mpan": meterMPAN(30)})
	})

	It("answers POST /data/readings as documented, with readings accepted and rejected", func() {
		needDatabase()
		assetIDs := c.call("GET", "/entities/site/"+home.id, tok, nil)["asset_ids"].([]any)
		Expect(assetIDs).NotTo(BeEmpty())
		rs := c.call("POST", "/data/readings", tok, map[string]any{"readings": []any{
			map[string]any{"asset_id": assetIDs[0], "label": "boundary_import_kw", "value": -0.4,
				"start_timestamp": "2026-04-14T17:00:00Z", "end_timestamp": "2026-04-14T17:30:00Z"},
			map[string]any{"asset_id": assetIDs[0], "label": "solar_power_kw", "value": -1,
				"start_timestamp": "2026-04-14T17:00:00Z", "end_timestamp": "2026-04-14T17:30:00Z"},
		}})["responses"].([]any)
		Expect(rs).To(HaveLen(2))
		Expect(rs[0]).To(HaveKeyWithValue("accepted", true))
		Expect(rs[1]).To(HaveKeyWithValue("error", "solar_power_kw must not be negative"))
	})

	It("answers the asset events and the latest intent as documented", func() {
		needDatabase()
		charger := c.call("GET", "/entities/asset/external-id/charger-"+home.mpan, tok, nil)["id"].(string)
		event := "/entities/asset/" + charger + "/event"
		intent := map[string]any{"energy_required_kwh": 20, "ready_by": "2026-11-28T07:30:00Z", "ready_by_local_time": "07:30",
			"energy_estimated": false, "charging_mode": "minimise_charging_time"}
		tariff := map[string]any{"off_peak_times": "00:00-05:30, 23:30-24:00", "timezone": "Europe/London", "tariff_type": "dual_rate"}
		c.call("POST", event, tok, map[string]any{"event_type": "plug_in", "intent": intent})
		c.call("POST", event+"/plug-in", tok, map[string]any{"intent": intent, "vehicle": map[string]any{"charging_rate_kw": 7.4},
			"tariff": tariff})
		c.call("POST", event+"/intent", tok, map[string]any{"intent": map[string]any{"energy_required_kwh": 12.5,
			"ready_by": "2026-11-28T06:00:00+01:00", "ready_by_local_time": "06:30"}})
		c.call("POST", event+"/charge-now", tok, map[string]any{"end_at": "2026-11-28T09:00:00Z"})
		c.call("POST", event+"/charge-now-deleted", tok, map[string]any{})
		c.call("POST", event+"/tariff-update", tok, map[string]any{"tariff": tariff})
		c.call("POST", event+"/plug-out", tok, map[string]any{})
		Expect(c.call("GET", "/entities/asset/"+charger+"/intent", tok, nil)["intent"]).
			To(HaveKeyWithValue("energy_required_kwh", 12.5))
	})

	It("answers the rewards endpoints as documented, with and without optional transaction fields", func(ctx SpecContext) {
		Expect(c.call("GET", "/rewards/"+home.id+"/transactions", tok, nil)["transactions"]).To(BeEmpty())
		c.call("GET", "/rewards/"+home.id+"/info", tok, nil)
		c.call("GET", "/rewards/"+home.id+"/url/balance?redirect_uri=https%3A%2F%2Fapp.example.com%2Fdone", tok, nil)

		siteName := identity.SiteNameForMPAN(home.mpan)
		start := metav1.Now().Rfc3339Copy()
		end := metav1.NewTime(start.Add(time.Hour))
		Expect(k8sClient.Create(ctx, &flexv1.RewardLedger{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: identity.RewardLedgerName(siteName)},
			Spec: flexv1.RewardLedgerSpec{SiteName: siteName, Transactions: []flexv1.RewardTransaction{
				{ID: identity.NewID(), Type: "flex event", CreditPence: 150, StartTime: &start, EndTime: &end,
					SettlementDate: start.Format("2006-01-02"), FlexWh: ptr.To[int64](-1234)},
				{ID: identity.NewID(), Type: "withdrawal", CreditPence: -100, StartTime: &end, PaymentStatus: "posted"},
				{ID: identity.NewID(), Type: "signup bonus", CreditPence: 500, SettlementDate: start.Format("2006-01-02")},
				{ID: identity.NewID(), Type: "correction", CreditPence: 0},
			}},
		})).To(Succeed())
		// The REST API reads ledgers from its cache.
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/rewards/"+home.id+"/transactions", tok, nil)["transactions"]
		}).Should(HaveLen(4))
		c.call("GET", "/rewards/"+home.id+"/transactions?limit=2&offset=1", tok, nil)
		c.call("GET", "/rewards/"+home.id+"/transactions", tok, nil)
		c.call("GET", "/rewards/"+home.id+"/info", tok, nil)
		c.call("GET", "/rewards/"+home.id+"/url/balance?redirect_uri=https%3A%2F%2Fapp.example.com%2Fdone", tok, nil)

		By("crediting over REST (201, then 200 with the stored record) and moving the withdrawal's payment status")
		credit := map[string]any{"transaction_id": identity.NewID(), "transaction_type": "goodwill credit", "credit_pence": 25,
			"settlement_date": start.Format("2006-01-02")}
		status, resp := call("POST", "/rewards/"+home.id+"/transactions", tok, credit)
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		c.call("POST", "/rewards/"+home.id+"/transactions", tok, credit)
		c.call("GET", "/rewards/"+home.id+"/transactions?since="+start.Add(-time.Hour).UTC().Format(time.RFC3339), tok, nil)
		withdrawal := c.call("GET", "/rewards/"+home.id+"/transactions?limit=1", tok, nil)["transactions"].([]any)[0].(map[string]any)
		Expect(withdrawal).To(HaveKeyWithValue("transaction_type", "withdrawal"))
		Expect(c.call("PATCH", "/rewards/"+home.id+"/transactions/"+withdrawal["transaction_id"].(string), tok,
			map[string]any{"payment_status": "returned"})).To(HaveKeyWithValue("payment_status", "returned"))
	})

	It("answers the hosted flow's routes as documented, through every step", func() {
		userTok := mustCall("POST", "/auth/component-token", tok, componentForm("conformance-hosted"+o.Namespace,
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))["access_token"].(string)
		Expect(c.hosted("GET", "/hosted/api/household", userTok, nil)).To(HaveKeyWithValue("start_step", "address"))
		c.hosted("PUT", "/hosted/api/address", userTok, map[string]any{"postcode": "SW1A 1AA", "street_address": "1 Hosted Road",
			"mpan": validMPAN(7093)})
		c.hosted("GET", "/hosted/api/meters?postcode=SW1A1AA&building_identifier=10", userTok, nil)
		c.hosted("PUT", "/hosted/api/consent", userTok, map[string]any{"gave_boundary_meter_consent": true})
		c.hosted("POST", "/hosted/api/assets", userTok, map[string]any{"type": "charger", "asset_model": "zappi",
			"installation_date": "2025-06-15", "power_kw": "7.4"})
		Expect(c.hosted("GET", "/hosted/api/eligibility", userTok, nil)["eligible"]).NotTo(BeEmpty())
		c.hosted("POST", "/hosted/api/enrol", userTok, map[string]any{"proposition": "limited_pause"})
		Expect(c.hosted("GET", "/hosted/api/household", userTok, nil)).To(HaveKeyWithValue("start_step", "rewards"))
		c.hosted("POST", "/hosted/api/unenrol", userTok, map[string]any{"proposition": "limited_pause"})
		c.hosted("GET", "/hosted/api/rewards", userTok, nil)
	})

	It("answers the offboard as documented, for a site with assets and one without", func(ctx SpecContext) {
		By("giving the household what only kubectl sets: a tariff and a custom dispatch power")
		site := entityStoredSite(Default, ctx, o.Namespace, home.mpan)
		site.Spec.Tariff = &flexv1.Tariff{Type: "dual_rate", CheapStartTime: "00:30", CheapEndTime: "04:30:00"}
		Expect(k8sClient.Update(ctx, site)).To(Succeed())
		charger := entityStoredAsset(ctx, o.Namespace, "charger-"+home.mpan)
		charger.Spec.CustomDispatchPowerW = ptr.To[int64](3500)
		Expect(k8sClient.Update(ctx, charger)).To(Succeed())
		Eventually(func(g Gomega) any { return mustCallG(g, "GET", "/entities/site/"+home.id, tok, nil)["tariff"] }).ShouldNot(BeNil())
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/entities/asset/external-id/charger-"+home.mpan, tok, nil)["properties"]
		}).Should(HaveKey("custom_dispatch_power_kw"))
		c.call("GET", "/entities/site/"+home.id, tok, nil)
		c.call("GET", "/entities/asset/external-id/charger-"+home.mpan, tok, nil)

		Expect(c.call("POST", "/entities/site/"+home.id+"/offboard-site-and-assets", tok, nil)).
			To(HaveKeyWithValue("asset", Not(BeNil())))
		Expect(c.call("POST", "/entities/site/"+user.id+"/offboard-site-and-assets", tok, nil)).
			NotTo(HaveKey("asset"), "absent, never null, for a site without assets")
	})

	It("answers the notification endpoints as documented, before and after deliveries", func(ctx SpecContext) {
		status, resp := call("POST", "/notifications/subscriptions", tok, map[string]any{"url": "https://hooks.flexsite.invalid/c"})
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		id := resp.Map()["id"].(string)
		Eventually(func(g Gomega) []any {
			return mustCallG(g, "GET", "/notifications/subscriptions", tok, nil)["subscriptions"].([]any)
		}).Should(HaveLen(1))
		c.call("GET", "/notifications/subscriptions", tok, nil)
		c.call("GET", "/notifications/subscriptions/"+id, tok, nil)
		c.call("GET", "/notifications/subscriptions/"+id+"/deliveries", tok, nil)

		// A delivery state as the deliverer writes it: one failure without an answer, one success
		// (the attempts in the outbox's log, the last delivery in the status).
		sub := &flexv1.Subscription{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: id}, sub)).To(Succeed())
		outbox := &outboxstore.Store{Pool: testDB.Pool}
		attempt := outboxstore.Delivery{SubscriptionUID: string(sub.UID), Organisation: o.Namespace,
			Event: events.Event{ID: "evt_2", Type: flexv1.EventPing}}
		Expect(outbox.Record(ctx, attempt, outboxstore.Outcome{Result: outboxstore.Failed, At: time.Now(),
			Latency: 10 * time.Second, Error: "timeout"})).To(Succeed())
		attempt.Attempts = 1
		Expect(outbox.Record(ctx, attempt, outboxstore.Outcome{Result: outboxstore.Delivered, At: time.Now(),
			StatusCode: 204, Latency: 12 * time.Millisecond})).To(Succeed())
		now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
		sub.Status.LastDelivery = &flexv1.DeliveryResult{Time: now, StatusCode: 204, LatencyMillis: 12}
		Expect(k8sClient.Status().Update(ctx, sub)).To(Succeed())
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/notifications/subscriptions/"+id, tok, nil)["last_delivery"]
		}).ShouldNot(BeNil())
		c.call("GET", "/notifications/subscriptions", tok, nil)
		c.call("GET", "/notifications/subscriptions/"+id, tok, nil)
		Expect(c.call("GET", "/notifications/subscriptions/"+id+"/deliveries", tok, nil)["deliveries"]).To(HaveLen(2))
	})

	It("answers the device connection endpoints as documented", func(ctx SpecContext) {
		patchAPIClient(ctx, o, func(c *flexv1.APIClient) { c.Spec.RedirectURIs = []string{registeredURI} })
		id := onboardedSite(tok, validMPAN(7010))
		c.call("POST", "/entities/site/"+id+"/token", tok, map[string]any{"refresh_token": "r", "access_token": "a",
			"token_type": "Bearer", "expires_in": 3600})
		c.call("GET", "/entities/site/"+id+"/oauth/"+deviceProviderName+"/initiate?redirect_uri="+registeredURI, tok, nil)
		Expect(c.call("GET", "/entities/site/"+id+"/connections", tok, nil)["connections"]).To(HaveLen(2))
		userTok := c.call("POST", "/auth/component-token", tok,
			componentForm("conformance-devices", "gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))["access_token"].(string)
		c.hosted("GET", "/hosted/api/connections", userTok, nil)
		c.hosted("POST", "/hosted/api/connections/"+deviceProviderName, userTok, nil)
	})

	It("answers the flex event endpoints as documented", func() {
		status, created := call("POST", "/flex-events", tok, flexEventBody)
		Expect(status).To(Equal(http.StatusCreated), "%s", created)
		c.call("GET", "/flex-events", tok, nil)
		c.call("GET", "/flex-events/"+created.Map()["id"].(string), tok, nil)
		site := mustCall("POST", "/entities/site/onboard", tok, household("1012345678903"))["site"].(map[string]any)
		c.call("GET", "/entities/site/"+site["site_id"].(string)+"/flex-events", tok, nil)
	})

	It("answers the dispatch endpoints as documented", func(ctx SpecContext) {
		mpan := validMPAN(7035)
		site := mustCall("POST", "/entities/site/onboard", tok, household(mpan))["site"].(map[string]any)["site_id"].(string)
		charger := mustCall("GET", "/entities/asset/external-id/charger-"+mpan, tok, nil)["id"].(string)
		start := time.Now().UTC().Truncate(30 * time.Minute).Add(24 * time.Hour)
		_, err := (&dispatchstore.Store{Pool: testDB.Pool}).Issue(ctx, o.Namespace, "https://flexsite.test",
			[]dispatchstore.Dispatch{{FlexEvent: "conformance-event", SiteID: site, AssetID: charger, MarketID: "limited_pause",
				From: start, To: start.Add(time.Hour), EventTimestamp: time.Now()}}, nil, time.Now())
		Expect(err).NotTo(HaveOccurred())
		id := dispatch.EventID(o.Namespace, "conformance-event", charger).String()
		c.call("POST", "/entities/asset/"+charger+"/callback/"+id, tok, map[string]any{"timestamp": "2026-11-27T12:00:00Z",
			"status": "ACCEPTED"})
		c.call("GET", "/examples/dispatch-event", tok, nil)
	})

	It("answers the EV schedule endpoints as documented", func(ctx SpecContext) {
		mpan := validMPAN(7036)
		site := mustCall("POST", "/entities/site/onboard", tok, household(mpan, func(b map[string]any) {
			b["proposition"] = "price_curve"
		}))["site"].(map[string]any)["site_id"].(string)
		mustCall("POST", "/entities/site/"+site+"/dispatch-consent", tok, map[string]any{"dispatch_methods": []any{"limited_pause"}})
		charger := mustCall("GET", "/entities/asset/external-id/charger-"+mpan, tok, nil)["id"].(string)
		body := map[string]any{"charging_schedule": []any{map[string]any{
			"start_timestamp": "2027-03-01T01:00:00Z", "end_timestamp": "2027-03-01T02:00:00Z"}}}
		path := "/entities/asset/" + charger + "/event/plug-in-schedule"
		// The enrolment becomes active and the consent reaches the cache: then it is answered.
		Eventually(func() int { status, _ := call("POST", path, tok, body); return status }).Should(Equal(http.StatusOK))
		c.call("POST", path, tok, body)
		c.call("GET", "/examples/ocpp-charging-profile", tok, nil)
		c.call("GET", "/examples/ocpp-charging-profile?asset_id="+charger, tok, nil)
	})

	It("answers the market prices and the price curves as documented", func(ctx SpecContext) {
		needDatabase()
		status, created := call("PUT", "/market-prices/conformance/2027-01-12", tok, dayPrices(Default, "2027-01-12", 48, pence))
		Expect(status).To(Equal(http.StatusCreated), "%s", created)
		c.call("PUT", "/market-prices/conformance/2027-01-12", tok, dayPrices(Default, "2027-01-12", 48, pence))
		c.call("GET", "/market-prices/conformance/2027-01-12", tok, nil)
		// A site on price_curve: its curve's periods are null (nothing declared for its market
		// today), which the document must allow.
		mpan := validMPAN(7037)
		answer := mustCall("POST", "/entities/site/onboard", tok, household(mpan, func(b map[string]any) { b["proposition"] = "price_curve" }))
		entityWaitActive(ctx, client.ObjectKey{Namespace: o.Namespace,
			Name: identity.EnrolmentName(identity.SiteNameForMPAN(mpan), flexv1.PropositionPriceCurve)})
		c.call("GET", "/entities/site/"+entitySiteID(answer)+"/price-curve", tok, nil)
		c.call("GET", "/entities/asset/"+entityAssetIDs(answer)[0].(string)+"/price-curve", tok, nil)
	})

	It("answers the battery schedule as documented", func(ctx SpecContext) {
		needDatabase()
		mpan := validMPAN(7038)
		answer := mustCall("POST", "/entities/site/onboard", tok, household(mpan, func(b map[string]any) {
			b["proposition"] = "full_asset_schedule_control"
			b["assets"].([]any)[1].(map[string]any)["properties"] = map[string]any{"power_kw": 5, "capacity_kwh": 5}
		}))
		entityWaitActive(ctx, client.ObjectKey{Namespace: o.Namespace,
			Name: identity.EnrolmentName(identity.SiteNameForMPAN(mpan), flexv1.PropositionFullAssetScheduleControl)})
		// Tomorrow declared: the horizon runs to tomorrow's 23:00, with priced pairs to plan.
		tomorrow := prices.Tomorrow(serverNow())
		status, declared := call("PUT", "/market-prices/full_asset_schedule_control/"+tomorrow.String(), tok,
			dayPrices(Default, tomorrow.String(), len(tomorrow.Periods()), pence))
		Expect(status).To(BeElementOf(http.StatusCreated, http.StatusOK), "%s", declared)
		c.call("GET", "/entities/asset/"+entityAssetIDs(answer)[1].(string)+"/battery-schedule", tok, nil)
	})

	It("answers the Meters group as documented", func(ctx SpecContext) {
		ensureMeterRegister(ctx)
		Expect(c.checkList("GET", "/meter/search?postcode=TN11AB", tok)).NotTo(BeEmpty())
		ref := meterRef(tok, meterStreetPostcode, "12")
		c.call("GET", "/meter/by-ref/"+ref, tok, nil)
		c.call("GET", "/meter/"+ref+"/mpan", tok, nil)
		c.call("POST", "/meter/by-mpan", tok, map[string]any{"mpan": meterMPAN(13)})
		c.call("GET", "/meter/"+meterMPAN(13), tok, nil)
		c.call("POST", "/meter/by-address", tok, map[string]any{"address": oldBarnAddress})
		c.call("GET", meterByAddressQuery(oldBarnAddress), tok, nil)
	})

	It("answers malformed input to each of production's operations in the error form production documents", func() {
		// One malformed request per operation of production's that documents a JSON body for
		// its 422: a path id that is no uuid, a body that is no object, a query out of range.
		const bad = "not-a-uuid"
		noObject := raw("[]")
		requests := []struct {
			method, path string
			body         any
		}{
			{"GET", "/entities/asset?limit=0", nil},
			{"POST", "/entities/asset", noObject},
			{"GET", "/entities/asset/" + bad, nil},
			{"DELETE", "/entities/asset/" + bad, nil},
			{"PATCH", "/entities/asset/" + bad, map[string]any{}},
			{"POST", "/entities/asset/" + bad + "/callback/event", map[string]any{}},
			{"GET", "/entities/asset/" + bad + "/intent", nil},
			{"POST", "/entities/asset/" + bad + "/event", map[string]any{}},
			{"POST", "/entities/asset/" + bad + "/event/plug-in", map[string]any{}},
			{"POST", "/entities/asset/" + bad + "/event/plug-out", map[string]any{}},
			{"POST", "/entities/asset/" + bad + "/event/intent", map[string]any{}},
			{"POST", "/entities/asset/" + bad + "/event/charge-now", map[string]any{}},
			{"POST", "/entities/asset/" + bad + "/event/charge-now-deleted", map[string]any{}},
			{"POST", "/entities/asset/" + bad + "/event/tariff-update", map[string]any{}},
			{"POST", "/entities/asset/" + bad + "/event/plug-in-schedule", map[string]any{}},
			{"GET", "/entities/asset/" + bad + "/battery-schedule", nil},
			{"GET", "/entities/asset/" + bad + "/price-curve", nil},
			{"GET", "/entities/site?limit=0", nil},
			{"POST", "/entities/site", noObject},
			{"POST", "/entities/site/initialise", noObject},
			{"POST", "/entities/site/check-eligibility", noObject},
			{"POST", "/entities/site/" + bad + "/unenrol", map[string]any{"proposition": "limited_pause"}},
			{"POST", "/entities/site/" + bad + "/offboard-site-and-assets", nil},
			{"GET", "/entities/site/" + bad, nil},
			{"DELETE", "/entities/site/" + bad, nil},
			{"PATCH", "/entities/site/" + bad, map[string]any{}},
			{"GET", "/entities/site/" + bad + "/eligibility", nil},
			{"POST", "/entities/site/" + bad + "/meter-consent", map[string]any{}},
			{"POST", "/entities/site/" + bad + "/dispatch-consent", map[string]any{}},
			{"POST", "/entities/site/" + bad + "/dispatch-deconsent", map[string]any{}},
			{"POST", "/entities/site/" + bad + "/token", map[string]any{}},
			{"GET", "/entities/site/" + bad + "/flex-events", nil},
			{"GET", "/entities/site/" + bad + "/price-curve", nil},
			{"GET", "/entities/site/" + bad + "/oauth/" + deviceProviderName + "/initiate", nil},
			// The register's routes answer a value they refuse in a sentence, as production
			// documents (a body that is no object gets the validation record: docs/api.md's
			// differences from production).
			{"POST", "/meter/by-address", map[string]any{"address": "1 High Street"}},
			{"POST", "/meter/by-mpan", map[string]any{"mpan": "123"}},
			{"GET", "/meter/?address=x", nil},
			{"GET", "/meter/search?postcode=SW1A", nil},
			{"GET", "/meter/123", nil},
			{"POST", "/auth/token-form", form{"grant_type": "password"}},
			{"POST", "/auth/component-token", form{}},
			{"POST", "/data/readings", noObject},
			{"GET", "/rewards/" + bad + "/info", nil},
			{"GET", "/rewards/" + bad + "/url/balance", nil},
			{"GET", "/rewards/" + bad + "/transactions", nil},
			{"POST", "/validation/mpan", noObject},
		}
		refused := map[string]bool{}
		failures := InterceptGomegaFailures(func() {
			for _, r := range requests {
				c.refused(r.method, r.path, tok, r.body, http.StatusUnprocessableEntity)
				refused[c.production.operation(r.method, r.path)] = true
			}
		})
		Expect(failures).To(BeEmpty(), "answers that break a document")

		By("a meter reference that does not open is not found, whatever it holds (production documents a 422)")
		for _, path := range []string{"/meter/by-ref/x", "/meter/x/mpan"} {
			c.refused("GET", path, tok, nil, http.StatusNotFound)
		}

		var uncovered []string
		for op, answers := range c.production.schemas {
			// An external id is any string: no request to it is malformed; a meter reference
			// that does not open is a 404 (above).
			if answers["422"] != nil && !refused[op] && !slices.Contains([]string{"GET /entities/asset/external-id/{external_id}",
				"GET /meter/by-ref/{meter_ref}", "GET /meter/{meter_ref}/mpan"}, op) {
				uncovered = append(uncovered, op)
			}
		}
		slices.Sort(uncovered)
		Expect(uncovered).To(BeEmpty(), "production's operations documenting a 422 body that no request here refused")
	})

	It("answers 429 as documented, with Retry-After: past the per-client rate, bad tokens, failed logins, the meter budget", func(ctx SpecContext) {
		ensureMeterRegister(ctx)
		// tooMany checks a 429: a Retry-After of whole seconds, an operation that documents 429
		// with that header, and a body that validates against the document's schema of it.
		tooMany := func(resp *http.Response, method, path string) {
			GinkgoHelper()
			status, retryAfter, body := readAnswer(resp)
			op := c.operation(method, path)
			Expect(status).To(Equal(http.StatusTooManyRequests), "%s: %s", op, body)
			Expect(strconv.Atoi(retryAfter)).To(BeNumerically(">=", 1), "%s: Retry-After %q", op, retryAfter)
			Expect(c.served.headers[op]["429"]).To(ContainElement("Retry-After"), "%s documents no 429 with Retry-After", op)
			instance, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
			Expect(err).NotTo(HaveOccurred(), "%s: %s", op, body)
			Expect(c.served.check(op, status, instance, body)).To(BeTrue(), "%s documents no JSON 429 body", op)
		}
		limited := func(l server.Limits) *httptest.Server {
			cfg := apiSrv.Config
			cfg.Limits = l
			srv := httptest.NewServer(server.NewServer(cfg))
			DeferCleanup(srv.Close)
			return srv
		}
		spent := web.Limit{Rate: 0.001, Burst: 1}

		By("a client past its rate")
		srv := limited(server.Limits{PerClient: spent})
		sitePath := "/entities/site/" + legacy.id
		Expect(limitedCall(srv, "GET", sitePath, tok, "", "").StatusCode).To(Equal(http.StatusOK))
		tooMany(limitedCall(srv, "GET", sitePath, tok, "", ""), "GET", sitePath)
		tooMany(limitedCall(srv, "POST", "/entities/site/onboard", tok, "application/json", "{}"), "POST", "/entities/site/onboard")

		By("an address past its budget of bad tokens")
		srv = limited(server.Limits{AuthFailuresPerAddress: spent})
		Expect(limitedCall(srv, "GET", "/entities/site", "not-a-token", "", "").StatusCode).To(Equal(http.StatusUnauthorized))
		tooMany(limitedCall(srv, "GET", "/rewards/"+legacy.id+"/info", "not-a-token", "", ""), "GET", "/rewards/"+legacy.id+"/info")

		By("a username past its budget of failed logins")
		srv = limited(server.Limits{LoginFailuresPerUsername: spent})
		login := func(password string) *http.Response {
			return limitedCall(srv, "POST", "/auth/token-form", "", "application/x-www-form-urlencoded",
				fmt.Sprintf("username=%s&password=%s&grant_type=password", o.Username, password))
		}
		Expect(login("guess").StatusCode).To(Equal(http.StatusUnauthorized))
		tooMany(login(o.Password), "POST", "/auth/token-form")

		By("an organisation past its meter lookups' budget")
		budget := budgeted(server.MeterBudgets{OrganisationPerHour: 1, OrganisationPerDay: 100})
		fresh := newOrg(ctx, flexv1.RoleEntityRead).token() // the budget counts an organisation's lookups on every replica
		Expect(limitedCall(budget, "GET", "/meter/"+meterMPAN(13), fresh, "", "").StatusCode).To(Equal(http.StatusOK))
		tooMany(limitedCall(budget, "GET", "/meter/"+meterMPAN(13), fresh, "", ""), "GET", "/meter/"+meterMPAN(13))
	})

	It("has checked an answer of every documented operation, against the served document and production's", func() {
		var unchecked []string
		for op, answers := range c.served.schemas {
			if answers["200"] != nil && c.checked[op] == 0 {
				unchecked = append(unchecked, op)
			}
		}
		slices.Sort(unchecked)
		Expect(unchecked).To(BeEmpty(), "operations no spec called")

		// Every one of production's operations that documents a JSON 2xx answer has had one
		// checked against production's schema.
		unchecked = nil
		for op, answers := range c.production.schemas {
			documented := false
			for status := range answers {
				documented = documented || strings.HasPrefix(status, "2")
			}
			if documented && c.productionChecked[op] == 0 {
				unchecked = append(unchecked, op)
			}
		}
		slices.Sort(unchecked)
		Expect(unchecked).To(BeEmpty(), "production's operations whose answer no spec checked against production's document")
	})
})

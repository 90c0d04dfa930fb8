package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/hostedflow"
	"github.com/flexsite/flexsite/internal/restapi/apidocs"
	"github.com/flexsite/flexsite/internal/web"
)

// jsonRoute is a served route whose request body is JSON (as the served OpenAPI document
// says), with the fields its body schema documents at the top level.
type jsonRoute struct {
	method, path string
	fields       []string // documented fields, sorted
	numbers      []string // those of them that are numbers
}

// jsonBodyRoutes are the served routes that take a JSON body: a route added with one is in
// the list by itself (routes_test.go holds the document to the routes served).
func jsonBodyRoutes() []jsonRoute {
	type schema struct {
		Ref        string            `json:"$ref"`
		Type       any               `json:"type"`
		Properties map[string]schema `json:"properties"`
		AnyOf      []schema          `json:"anyOf"`
	}
	var doc struct {
		Paths map[string]map[string]struct {
			RequestBody struct {
				Content map[string]struct {
					Schema schema `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]schema `json:"schemas"`
		} `json:"components"`
	}
	Expect(json.Unmarshal(apidocs.Document(), &doc)).To(Succeed())
	resolve := func(s schema) schema {
		if name, ok := strings.CutPrefix(s.Ref, "#/components/schemas/"); ok {
			return doc.Components.Schemas[name]
		}
		return s
	}
	isNumber := func(s schema) bool {
		for _, t := range append([]schema{s}, s.AnyOf...) {
			if t := fmt.Sprint(resolve(t).Type); strings.Contains(t, "number") || strings.Contains(t, "integer") {
				return true
			}
		}
		return false
	}
	var out []jsonRoute
	for _, r := range apiSrv.Routes() {
		op, ok := doc.Paths[r.Path][strings.ToLower(r.Method)]
		Expect(ok).To(BeTrue(), "%s %s is not documented", r.Method, r.Path)
		body, ok := op.RequestBody.Content["application/json"]
		if !ok {
			continue
		}
		route := jsonRoute{method: r.Method, path: r.Path}
		for name, field := range resolve(body.Schema).Properties {
			route.fields = append(route.fields, name)
			if isNumber(field) {
				route.numbers = append(route.numbers, name)
			}
		}
		slices.Sort(route.fields)
		slices.Sort(route.numbers)
		out = append(out, route)
	}
	return out
}

// sendRaw sends body as it is, as JSON, with the token and headers given.
func sendRaw(method, path, token string, body []byte, headers map[string]string) (int, response) {
	GinkgoHelper()
	req, err := http.NewRequest(method, apiServer.URL+path, bytes.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, out
}

// memoryInUse is the Go heap and the goroutine stacks in use (what the manager's resident
// memory follows).
func memoryInUse() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// Hostile JSON bodies (issue 47): every route that takes a JSON body is sent each body a
// hostile client might, and refuses it at once with a 4xx (the 422 naming what is wrong, or
// the 413 of a body too large), its memory bounded by the body, not by how it nests.
var _ = Describe("Hostile JSON bodies", Ordered, func() {
	var orgTok, userTok string
	BeforeAll(func(ctx SpecContext) {
		orgTok = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards, flexv1.RoleComponents,
			flexv1.RoleRewardsWrite, flexv1.RoleRewardsAdmin, flexv1.RoleFlexEventsWrite, flexv1.RolePricesWrite).token()
		userTok = mustCall("POST", "/auth/component-token", orgTok, componentForm("hostile-json-user",
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))["access_token"].(string)
	})

	It("refuses each hostile JSON body on every route that takes one: a 4xx at once, memory within 16 MiB", func() {
		// Path parameters well formed (the body is read before anything is looked up).
		param := regexp.MustCompile(`\{[a-z_]+\}`)
		concrete := func(path string) string {
			return param.ReplaceAllStringFunc(path, func(p string) string {
				switch p {
				case "{market}":
					return "hostile"
				case "{date}":
					return "2027-01-10"
				}
				return "00000000-0000-4000-8000-000000000047"
			})
		}
		// keys is an object of n keys.
		keys := func(n int) string {
			var b strings.Builder
			b.WriteByte('{')
			for i := range n {
				if i > 0 {
					b.WriteByte(',')
				}
				b.WriteString(`"` + strconv.FormatInt(int64(i), 36) + `":0`)
			}
			return b.String() + "}"
		}
		// each is a body giving each documented field (or "x", for none) the value v.
		each := func(fields []string, v string) []byte {
			if len(fields) == 0 {
				fields = []string{"x"}
			}
			parts := make([]string, len(fields))
			for i, f := range fields {
				parts[i] = strconv.Quote(f) + ": " + v
			}
			return []byte("{" + strings.Join(parts, ", ") + "}")
		}
		first := func(r jsonRoute) string {
			if len(r.fields) == 0 {
				return "x"
			}
			return r.fields[0]
		}
		deep := []byte(strings.Repeat("[", 1_000_000))
		tooDeep := strings.Repeat("[", web.MaxDepth) + strings.Repeat("]", web.MaxDepth)
		manyKeys := []byte(keys(100_000))
		Expect(len(manyKeys)).To(BeNumerically("<", web.MaxBodyBytes))
		hostile := []struct {
			what string
			body func(r jsonRoute) []byte
			// typ is what a 422 must name ("": any 4xx will do: the route's own refusal).
			typ string
		}{
			{"1 MB of [", func(jsonRoute) []byte { return deep }, "json_invalid"},
			{"lists nested past the limit in each documented field", func(r jsonRoute) []byte { return each(r.fields, tooDeep) }, "json_invalid"},
			{"100,000 keys in one object", func(jsonRoute) []byte { return manyKeys }, "too_long"},
			{"a documented field twice", func(r jsonRoute) []byte {
				return []byte(fmt.Sprintf(`{%q: "a", %q: "b"}`, first(r), first(r)))
			}, "duplicate_key"},
			{"a text that is not UTF-8", func(r jsonRoute) []byte { return each(r.fields, "\"caf\xe9\"") }, "json_invalid"},
			{"half a surrogate pair", func(r jsonRoute) []byte { return each(r.fields, `"\ud800"`) }, "json_invalid"},
			{"1e999 in each number field", func(r jsonRoute) []byte { return each(cmpOr(r.numbers, r.fields), "1e999") }, ""},
			{"a 1 MiB text", func(r jsonRoute) []byte { return each([]string{first(r)}, `"`+strings.Repeat("a", 1<<20)+`"`) }, ""},
			{"a text just under the body limit", func(r jsonRoute) []byte {
				return each([]string{first(r)}, `"`+strings.Repeat("a", web.MaxBodyBytes-64)+`"`)
			}, ""},
		}

		routes := jsonBodyRoutes()
		names := make([]string, len(routes))
		for i, r := range routes {
			names[i] = r.method + " " + r.path
		}
		// Every door's: the REST API's (the readings' stream among them) and the hosted flow's.
		Expect(names).To(ContainElements("POST /notifications/subscriptions", "POST /data/readings",
			"PUT /hosted/api/address", "POST /hosted/api/assets"))
		var wrong []string
		var worst uint64
		for _, r := range routes {
			token, headers := orgTok, map[string]string(nil)
			if strings.HasPrefix(r.path, "/hosted/api/") {
				token, headers = userTok, map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"}
			}
			for _, h := range hostile {
				body := h.body(r)
				runtime.GC()
				before := memoryInUse()
				status, resp := sendRaw(r.method, concrete(r.path), token, body, headers)
				if after := memoryInUse(); after > before && after-before > worst {
					worst = after - before
					if worst >= 16<<20 {
						wrong = append(wrong, fmt.Sprintf("%s %s, %s: %d MiB more memory in use", r.method, r.path, h.what,
							worst>>20))
					}
				}
				cell := fmt.Sprintf("%s %s, %s: %d %.300s", r.method, r.path, h.what, status, resp)
				switch {
				case status < 400 || status >= 500:
					wrong = append(wrong, cell)
				case h.typ == "" || status == http.StatusRequestEntityTooLarge:
				case status != http.StatusUnprocessableEntity:
					wrong = append(wrong, cell+" (want the 422 naming "+h.typ+")")
				default:
					items, _ := resp.Detail().([]any)
					if !slices.ContainsFunc(items, func(it any) bool { return it.(map[string]any)["type"] == h.typ }) {
						wrong = append(wrong, cell+" (want an item of type "+h.typ+")")
					}
				}
			}
		}
		GinkgoWriter.Printf("hostile JSON bodies: %d routes x %d bodies; most memory one added: %d KiB\n",
			len(routes), len(hostile), worst>>10)
		Expect(wrong).To(BeEmpty())
	})
})

func cmpOr(a, b []string) []string {
	if len(a) > 0 {
		return a
	}
	return b
}

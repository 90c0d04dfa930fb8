package apidocs

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
)

// wantRoutes is every route the REST API serves; the document must describe exactly these.
var wantRoutes = []Route{
	{"GET", "/rewards/{site_id}/url/balance"},
	{"GET", "/hosted/rewards/link/{code}"},
	{"GET", "/hosted/rewards"},
	{"POST", "/hosted/rewards/code"},
	{"POST", "/hosted/rewards/verify"},
	{"POST", "/hosted/rewards/bank"},
	{"POST", "/hosted/rewards/withdraw"},
	{"POST", "/hosted/rewards/finish"},
	{"POST", "/notifications/subscriptions"},
	{"GET", "/notifications/subscriptions"},
	{"GET", "/notifications/subscriptions/{subscription_id}"},
	{"DELETE", "/notifications/subscriptions/{subscription_id}"},
	{"POST", "/notifications/subscriptions/{subscription_id}/test"},
	{"GET", "/notifications/subscriptions/{subscription_id}/deliveries"},
	{"POST", "/auth/token-form"},
	{"POST", "/auth/component-token"},
	{"GET", "/auth/users/me/"},
	{"POST", "/entities/site/onboard"},
	{"POST", "/entities/site/initialise"},
	{"POST", "/entities/site/onboard-site-and-asset"},
	{"POST", "/entities/asset"},
	{"GET", "/entities/asset"},
	{"GET", "/entities/asset/{asset_id}"},
	{"PATCH", "/entities/asset/{asset_id}"},
	{"DELETE", "/entities/asset/{asset_id}"},
	{"GET", "/entities/asset/external-id/{external_id}"},
	{"POST", "/entities/asset/{asset_id}/event"},
	{"POST", "/entities/asset/{asset_id}/event/plug-in"},
	{"POST", "/entities/asset/{asset_id}/event/plug-out"},
	{"POST", "/entities/asset/{asset_id}/event/intent"},
	{"POST", "/entities/asset/{asset_id}/event/charge-now"},
	{"POST", "/entities/asset/{asset_id}/event/charge-now-deleted"},
	{"POST", "/entities/asset/{asset_id}/event/tariff-update"},
	{"GET", "/entities/asset/{asset_id}/intent"},
	{"GET", "/entities/asset/{asset_id}/battery-schedule"},
	{"GET", "/entities/site"},
	{"POST", "/entities/site"},
	{"GET", "/entities/site/{site_id}"},
	{"POST", "/entities/site/{site_id}/offboard-site-and-assets"},
	{"GET", "/entities/site/{site_id}/eligibility"},
	{"POST", "/entities/site/{site_id}/enrol"},
	{"POST", "/entities/site/{site_id}/unenrol"},
	{"POST", "/entities/site/{site_id}/meter-consent"},
	{"DELETE", "/entities/site/{site_id}"},
	{"PATCH", "/entities/site/{site_id}"},
	{"POST", "/entities/site/check-eligibility"},
	{"POST", "/entities/site/{site_id}/dispatch-consent"},
	{"POST", "/entities/site/{site_id}/dispatch-deconsent"},
	{"GET", "/meter/search"},
	{"GET", "/meter/by-ref/{meter_ref}"},
	{"GET", "/meter/{meter_ref}/mpan"},
	{"POST", "/meter/by-mpan"},
	{"GET", "/meter/{mpan}"},
	{"POST", "/meter/by-address"},
	{"GET", "/meter/"},
	{"POST", "/validation/mpan"},
	{"POST", "/data/readings"},
	{"GET", "/rewards/{site_id}/transactions"},
	{"POST", "/rewards/{site_id}/transactions"},
	{"PATCH", "/rewards/{site_id}/transactions/{transaction_id}"},
	{"GET", "/rewards/{site_id}/info"},
	{"GET", "/healthz"},
	{"GET", "/readyz"},
	{"GET", "/openapi.json"},
	{"GET", "/docs"},
	{"GET", "/hosted/flow"},
	{"GET", "/hosted/flow.js"},
	{"GET", "/hosted/flow.css"},
	{"GET", "/hosted/api/household"},
	{"PUT", "/hosted/api/address"},
	{"GET", "/hosted/api/meters"},
	{"PUT", "/hosted/api/consent"},
	{"POST", "/hosted/api/assets"},
	{"DELETE", "/hosted/api/assets/{asset_id}"},
	{"GET", "/hosted/api/eligibility"},
	{"POST", "/hosted/api/enrol"},
	{"POST", "/hosted/api/unenrol"},
	{"GET", "/hosted/api/rewards"},
	{"GET", "/hosted/api/connections"},
	{"POST", "/hosted/api/connections/{provider}"},
	{"GET", "/entities/site/{site_id}/oauth/{provider}/initiate"},
	{"POST", "/entities/site/{site_id}/token"},
	{"GET", "/entities/site/{site_id}/connections"},
	{"DELETE", "/entities/site/{site_id}/connections/{provider}"},
	{"GET", "/oauth/callback"},
	{"POST", "/flex-events"},
	{"GET", "/flex-events"},
	{"GET", "/flex-events/{id}"},
	{"GET", "/entities/site/{site_id}/flex-events"},
	{"POST", "/entities/asset/{asset_id}/callback/{event_id}"},
	{"GET", "/examples/dispatch-event"},
	{"GET", "/entities/site/{site_id}/price-curve"},
	{"GET", "/entities/asset/{asset_id}/price-curve"},
	{"PUT", "/market-prices/{market}/{date}"},
	{"GET", "/market-prices/{market}/{date}"},
	{"POST", "/entities/asset/{asset_id}/event/plug-in-schedule"},
	{"GET", "/examples/ocpp-charging-profile"},
}

type operation struct {
	Parameters  []any              `json:"parameters"`
	RequestBody any                `json:"requestBody"`
	Responses   map[string]any     `json:"responses"`
	Security    []map[string][]any `json:"security"`
	Deprecated  bool               `json:"deprecated"`
}

func parse(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(Document(), &doc); err != nil {
		t.Fatalf("document is not valid JSON: %v", err)
	}
	return doc
}

func TestDocumentHeader(t *testing.T) {
	doc := parse(t)
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", doc["openapi"])
	}
	info, _ := doc["info"].(map[string]any)
	if info["title"] != "Flexsite" || info["version"] != "1.4.6-flexsite.1" || info["description"] == "" {
		t.Errorf("info = %v", info)
	}
}

// TestRefsResolve follows every $ref (local JSON pointers only) to an existing node.
func TestRefsResolve(t *testing.T) {
	doc := parse(t)
	var refs []string
	var walk func(any)
	walk = func(n any) {
		switch v := n.(type) {
		case map[string]any:
			if r, ok := v["$ref"].(string); ok {
				refs = append(refs, r)
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc)
	if len(refs) == 0 {
		t.Fatal("no $ref found")
	}
	for _, r := range refs {
		if !strings.HasPrefix(r, "#/") {
			t.Errorf("$ref %q is not local", r)
			continue
		}
		var node any = doc
		for _, part := range strings.Split(r[2:], "/") {
			part = strings.NewReplacer("~1", "/", "~0", "~").Replace(part)
			m, ok := node.(map[string]any)
			if !ok || m[part] == nil {
				t.Errorf("$ref %q does not resolve", r)
				break
			}
			node = m[part]
		}
	}
}

// deprecated are the paths prod marks deprecated: their operations say so.
var deprecated = map[string]bool{"/entities/site/onboard-site-and-asset": true,
	"/meter/{meter_ref}/mpan": true, "/meter/{mpan}": true, "/meter/": true}

func TestOperationResponses(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]operation `json:"paths"`
	}
	if err := json.Unmarshal(Document(), &doc); err != nil {
		t.Fatal(err)
	}
	for p, item := range doc.Paths {
		for m, op := range item {
			name := strings.ToUpper(m) + " " + p
			if len(op.Responses) == 0 {
				t.Errorf("%s: no responses", name)
			}
			// The OAuth callback is a page for the household's browser: a bad answer from the
			// provider is a redirect or a page in words, never a 422.
			if (op.RequestBody != nil || len(op.Parameters) > 0) && op.Responses["422"] == nil &&
				!strings.HasPrefix(p, "/hosted/rewards/link/") && p != "/oauth/callback" {
				t.Errorf("%s takes input but documents no 422", name)
			}
			if len(op.Security) > 0 && op.Responses["401"] == nil {
				t.Errorf("%s needs auth but documents no 401", name)
			}
			// Every authenticated operation can be refused 429 (the per-client rate, an
			// address's bad tokens), and the login its failed tries: each says so, with
			// Retry-After.
			if (len(op.Security) > 0 || p == "/auth/token-form") && !documentsRetryAfter(op.Responses["429"]) {
				t.Errorf("%s can answer 429 but documents no 429 with Retry-After", name)
			}
			public := p == "/auth/token-form" || p == "/healthz" || p == "/readyz" || p == "/openapi.json" || p == "/docs" ||
				strings.HasPrefix(p, "/hosted/flow") || p == "/oauth/callback"
			// The hosted rewards page takes no bearer token: its one-time link and session
			// cookie are its authentication, and it answers HTML (a bad code is a 404 page).
			if strings.HasPrefix(p, "/hosted/rewards") {
				public = true
				if op.Responses["401"] == nil && op.Responses["404"] == nil {
					t.Errorf("%s documents no answer for a caller without a session", name)
				}
			}
			if public == (len(op.Security) > 0) {
				t.Errorf("%s: security = %v, want public=%v", name, op.Security, public)
			}
			if op.Deprecated != deprecated[p] {
				t.Errorf("%s: deprecated = %v", name, op.Deprecated)
			}
		}
	}
}

// documentsRetryAfter reports whether a response (inline or the shared TooManyRequests)
// describes the Retry-After header.
func documentsRetryAfter(response any) bool {
	r, _ := response.(map[string]any)
	if ref, _ := r["$ref"].(string); ref != "" {
		var doc struct {
			Components struct {
				Responses map[string]map[string]any `json:"responses"`
			} `json:"components"`
		}
		if err := json.Unmarshal(Document(), &doc); err != nil {
			return false
		}
		r = doc.Components.Responses[strings.TrimPrefix(ref, "#/components/responses/")]
	}
	headers, _ := r["headers"].(map[string]any)
	return headers["Retry-After"] != nil
}

// TestPropositionEnums checks every proposition enum carries all three propositions.
func TestPropositionEnums(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum  []string `json:"enum"`
					Items struct {
						Enum []string `json:"enum"`
					} `json:"items"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(Document(), &doc); err != nil {
		t.Fatal(err)
	}
	want := []string{"limited_pause", "full_asset_schedule_control", "price_curve"}
	n := 0
	for name, s := range doc.Components.Schemas {
		for prop, ps := range s.Properties {
			if prop != "proposition" && prop != "eligible_propositions" {
				continue
			}
			n++
			got := ps.Enum
			if prop == "eligible_propositions" {
				got = ps.Items.Enum
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s.%s enum = %v, want %v", name, prop, got, want)
			}
		}
	}
	if n != 7 { // five, and a flex event's request and answer
		t.Errorf("found %d proposition properties, want 7", n)
	}
}

func TestPaths(t *testing.T) {
	cmp := func(a, b Route) int { return strings.Compare(a.Path+" "+a.Method, b.Path+" "+b.Method) }
	want := slices.SortedFunc(slices.Values(wantRoutes), cmp)
	got := Paths()
	if !slices.Equal(got, want) {
		for _, r := range got {
			if !slices.Contains(want, r) {
				t.Errorf("documented but not served: %v", r)
			}
		}
		for _, r := range want {
			if !slices.Contains(got, r) {
				t.Errorf("served but not documented: %v", r)
			}
		}
		t.Errorf("Paths() = %v", got)
	}
}

func TestHandler(t *testing.T) {
	srv := httptest.NewServer(Handler())
	defer srv.Close()

	for _, tc := range []struct {
		path, ctype, contains string
		status                int
	}{
		{"/openapi.json", "application/json", `"openapi": "3.1.0"`, http.StatusOK},
		{"/docs", "text/html", "docs/assets/swagger-ui-bundle.js", http.StatusOK},
		{"/docs/assets/swagger-ui-bundle.js", "text/javascript", "SwaggerUIBundle", http.StatusOK},
		{"/docs/assets/swagger-ui.css", "text/css", ".swagger-ui", http.StatusOK},
		{"/docs/assets/docs.js", "text/javascript", "validatorUrl: null", http.StatusOK},
		{"/docs/assets/LICENSE", "text/plain", "Apache License", http.StatusOK},
		{"/docs/assets/nope.js", "", "", http.StatusNotFound},
		{"/docs/assets/", "", "", http.StatusNotFound},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		_, _ = io.Copy(&body, resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: status %d, want %d", tc.path, resp.StatusCode, tc.status)
			continue
		}
		if tc.status != http.StatusOK {
			continue
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.ctype) {
			t.Errorf("GET %s: Content-Type %q, want %s", tc.path, ct, tc.ctype)
		}
		if !strings.Contains(body.String(), tc.contains) {
			t.Errorf("GET %s: body lacks %q", tc.path, tc.contains)
		}
		if resp.Header.Get("ETag") == "" || resp.Header.Get("Cache-Control") == "" {
			t.Errorf("GET %s: no caching headers", tc.path)
		}
		if strings.HasPrefix(tc.path, "/docs/assets/") && !strings.Contains(resp.Header.Get("Cache-Control"), "max-age=") {
			t.Errorf("GET %s: Cache-Control %q", tc.path, resp.Header.Get("Cache-Control"))
		}
	}

	resp, err := http.Get(srv.URL + "/docs")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self';") {
		t.Errorf("docs CSP = %q", csp)
	}

	// A revalidation with the ETag is answered 304.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/openapi.json", nil)
	first, err := http.Get(srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	_ = first.Body.Close()
	req.Header.Set("If-None-Match", first.Header.Get("ETag"))
	second, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = second.Body.Close()
	if second.StatusCode != http.StatusNotModified {
		t.Errorf("conditional GET: status %d, want 304", second.StatusCode)
	}

	// Only GET (and HEAD).
	post, err := http.Post(srv.URL+"/openapi.json", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /openapi.json: status %d, want 405", post.StatusCode)
	}
}

// TestNoExternalURLs keeps the docs page offline: it references nothing outside the server.
func TestNoExternalURLs(t *testing.T) {
	for _, name := range []string{"index.html", "docs.js"} {
		b := indexHTML
		if name != "index.html" {
			b, _ = assetFS.ReadFile("assets/" + name)
		}
		if s := string(b); strings.Contains(s, "http://") || strings.Contains(s, "https://") || strings.Contains(s, "//cdn") {
			t.Errorf("%s references an external URL", name)
		}
	}
}

// TestProductionOperations keeps a client generated from production's document working here
// unchanged: each of production's operations keeps production's tags and operationId (client
// generators name classes and methods after them), and Flexsite's own operations are tagged
// with tags production does not use, so they never land in production's classes.
func TestProductionOperations(t *testing.T) {
	type op struct {
		Tags        []string `json:"tags"`
		OperationID string   `json:"operationId"`
	}
	type document struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
		Tags  []struct {
			Name string `json:"name"`
		} `json:"tags"`
	}
	read := func(b []byte) (document, map[string]op) {
		var d document
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		ops := map[string]op{}
		for p, item := range d.Paths {
			for m, raw := range item {
				switch m {
				case "get", "put", "post", "delete", "patch":
					var o op
					if err := json.Unmarshal(raw, &o); err != nil {
						t.Fatal(err)
					}
					ops[strings.ToUpper(m)+" "+p] = o
				}
			}
		}
		return d, ops
	}
	prodBytes, err := os.ReadFile("testdata/production-openapi-1.4.6.json")
	if err != nil {
		t.Fatal(err)
	}
	prodDoc, prod := read(prodBytes)
	servedDoc, served := read(Document())
	if len(prod) != 55 {
		t.Fatalf("production's document has %d operations, want 55", len(prod))
	}
	prodTags := map[string]bool{}
	for _, tag := range prodDoc.Tags {
		prodTags[tag.Name] = true
	}
	declared := map[string]bool{}
	for _, tag := range servedDoc.Tags {
		declared[tag.Name] = true
	}
	for name := range prodTags {
		if !declared[name] {
			t.Errorf("production's tag %q is not declared", name)
		}
	}
	for name, want := range prod {
		got, ok := served[name]
		switch {
		case !ok:
			t.Errorf("%s: production's operation is not served", name)
		case !slices.Equal(got.Tags, want.Tags):
			t.Errorf("%s: tags %q, production's %q", name, got.Tags, want.Tags)
		case got.OperationID != want.OperationID:
			t.Errorf("%s: operationId %q, production's %q", name, got.OperationID, want.OperationID)
		}
	}
	ids := map[string]string{}
	for name, o := range served {
		if other, dup := ids[o.OperationID]; dup || o.OperationID == "" {
			t.Errorf("%s: operationId %q is empty or also %s's", name, o.OperationID, other)
		}
		ids[o.OperationID] = name
		if len(o.Tags) == 0 {
			t.Errorf("%s: no tag", name)
		}
		for _, tag := range o.Tags {
			if !declared[tag] {
				t.Errorf("%s: tag %q is not declared in the document's tags", name, tag)
			}
			if _, isProd := prod[name]; !isProd && prodTags[tag] {
				t.Errorf("%s: Flexsite's own operation has production's tag %q", name, tag)
			}
		}
	}
}

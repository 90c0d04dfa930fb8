package apidocs

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// docURL names the document for the schema compiler; its $refs are relative to it.
const docURL = "https://flexsite.invalid/openapi.json"

// compiler loads the document as one JSON Schema 2020-12 resource (the dialect of OpenAPI 3.1),
// so that a JSON pointer into it compiles one schema, its $refs into components included.
// Formats are asserted: a uuid or date-time the document promises must be one.
func compiler(t *testing.T) *jsonschema.Compiler {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(Document()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(docURL, doc); err != nil {
		t.Fatal(err)
	}
	return c
}

// pointer is the JSON pointer of the node at keys.
func pointer(keys ...string) string {
	esc := strings.NewReplacer("~", "~0", "/", "~1")
	var b strings.Builder
	for _, k := range keys {
		b.WriteString("/" + esc.Replace(k))
	}
	return b.String()
}

// responseSchemas lists the pointer of every response schema of the document: each status and
// media type of each operation, and of each shared response in components.
func responseSchemas(t *testing.T) []string {
	t.Helper()
	type response struct {
		Content map[string]struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"content"`
	}
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Responses map[string]response `json:"responses"`
		} `json:"components"`
	}
	if err := json.Unmarshal(Document(), &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	add := func(r response, at ...string) {
		for mt, c := range r.Content {
			if c.Schema != nil {
				out = append(out, pointer(append(at, "content", mt, "schema")...))
			}
		}
	}
	for p, item := range doc.Paths {
		for m, raw := range item {
			var op struct {
				Responses map[string]response `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				continue // not an operation (e.g. path-level parameters)
			}
			for status, r := range op.Responses {
				add(r, "paths", p, m, "responses", status)
			}
		}
	}
	for name, r := range doc.Components.Responses {
		add(r, "components", "responses", name)
	}
	return out
}

func TestResponseSchemasCompile(t *testing.T) {
	c := compiler(t)
	ptrs := responseSchemas(t)
	if len(ptrs) < 50 {
		t.Fatalf("found %d response schemas; the walk is broken", len(ptrs))
	}
	for _, ptr := range ptrs {
		if _, err := c.Compile(docURL + "#" + ptr); err != nil {
			t.Errorf("%s does not compile as JSON Schema 2020-12: %v", ptr, err)
		}
	}
}

// TestNullableResponseFields checks the document against answers the server gives: a field
// production declares non-nullable is absent when the server has no value for it, never null
// (a strict client refuses a null), and the document says so.
func TestNullableResponseFields(t *testing.T) {
	const (
		siteID  = "a1b2c3d4-e5f6-7890-abcd-ef1234567890"
		assetID = "b2c3d4e5-f6a7-8901-bcde-f23456789012"
	)
	// site is a site record; consent "" leaves gave_boundary_meter_consent_at out.
	site := func(consent string) string {
		rec := `{"id": "` + siteID + `", "mpan": "1200000000011", "postcode": "SW1A 1AA", "address": "1 Lane",
			"asset_ids": [], "markets": [], "dispatch_methods": []`
		if consent != "" {
			rec += `, "gave_boundary_meter_consent_at": ` + consent
		}
		return rec + "}"
	}
	asset := `{"id": "` + assetID + `", "external_id": "charger-1", "type": "charger", "site_id": "` + siteID + `",
		"properties": {"power_kw": 7.4}}`
	c := compiler(t)
	for _, tc := range []struct {
		name, op, body string
		valid          bool
	}{
		{"site without consent", "GET /entities/site/{site_id}", site(""), true},
		{"site with a null consent", "GET /entities/site/{site_id}", site("null"), false},
		{"site with consent", "GET /entities/site/{site_id}", site(`"2026-01-15T10:30:00Z"`), true},
		{"site with a malformed consent", "GET /entities/site/{site_id}", site(`"yesterday"`), false},
		{"offboard of a site without assets", "POST /entities/site/{site_id}/offboard-site-and-assets",
			`{"site": ` + site("") + `}`, true},
		{"offboard of a site without assets, asset null", "POST /entities/site/{site_id}/offboard-site-and-assets",
			`{"site": ` + site("") + `, "asset": null}`, false},
		{"offboard of a site with an asset", "POST /entities/site/{site_id}/offboard-site-and-assets",
			`{"site": ` + site("") + `, "asset": ` + asset + `}`, true},
		{"legacy onboard", "POST /entities/site/onboard-site-and-asset", `{"site": ` + site("") + `, "asset": ` + asset + `}`, true},
		{"legacy onboard without asset", "POST /entities/site/onboard-site-and-asset", `{"site": ` + site("") + `, "asset": null}`, false},
		{"legacy onboard asset without type", "POST /entities/site/onboard-site-and-asset",
			`{"site": ` + site("") + `, "asset": ` + strings.Replace(asset, `"type": "charger", `, "", 1) + `}`, false},
		{"a price curve", "GET /entities/site/{site_id}/price-curve",
			`{"half_hourly_traded_prices": [{"start_timestamp": "2027-01-12T14:00:00Z", "price_gbp_per_mwh": 45.67}]}`, true},
		{"a price curve with a null price", "GET /entities/site/{site_id}/price-curve",
			`{"half_hourly_traded_prices": [{"start_timestamp": "2027-01-12T14:00:00Z", "price_gbp_per_mwh": null}]}`, false},
		{"a page of assets", "GET /entities/asset",
			`{"assets": [` + asset + `], "total_num_assets": 11, "total_num_pages": 2, "page_number": 2}`, true},
		{"an empty page of assets", "GET /entities/asset",
			`{"assets": [], "total_num_assets": 0, "total_num_pages": 0, "page_number": 1}`, true},
		{"a page of assets without its total", "GET /entities/asset", `{"assets": [], "total_num_pages": 0, "page_number": 1}`, false},
		{"an updated asset", "PATCH /entities/asset/{asset_id}", asset, true},
		{"an updated asset without its site", "PATCH /entities/asset/{asset_id}",
			strings.Replace(asset, `"site_id": "`+siteID+`",`, "", 1), false},
	} {
		method, path, _ := strings.Cut(tc.op, " ")
		sch, err := c.Compile(docURL + "#" +
			pointer("paths", path, strings.ToLower(method), "responses", "200", "content", "application/json", "schema"))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, err := jsonschema.UnmarshalJSON(strings.NewReader(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if err := sch.Validate(body); (err == nil) != tc.valid {
			t.Errorf("%s: valid = %v, want %v (%v)", tc.name, err == nil, tc.valid, err)
		}
	}
}

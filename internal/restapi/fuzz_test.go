package restapi

// Fuzz targets for every request decoder of the REST API. Each target feeds arbitrary input to
// the decoder and to the same field readers the handler uses, and also to the real handler,
// whose use cases read from webtest.UnreachableStore: every read fails with
// webtest.ErrStoreReached. A request either ends in the documented 4xx answer before the
// handler reads anything, or it reaches the store, which proves every check before it passed.
// The invariants:
//
//   - no panic;
//   - every error is an answer (web.HTTPError) with a 4xx status (never a 500), rendered as JSON
//     {"detail": ...}; a 422 validation record names at least one item, and every item's loc
//     starts with "body", "query" or "path" (whichever the input was);
//   - the handler and the decoder agree: the handler answers exactly the 422 the field
//     readers collect, and reaches the store only when they collected nothing;
//   - what the decoder accepts is storable: it satisfies the CRD schema of the object it
//     ends up in (patterns, lengths, formats, object names), so the API server cannot refuse
//     it (its refusal would be a 500);
//   - an upsert is idempotent: merged again into what it stored, it changes nothing.
//
// Run one with: go test -run='^$' -fuzz=FuzzDecodeJSONOnboard -fuzztime=20s ./internal/restapi/
// Regression inputs live in testdata/fuzz/<FuzzName>/ and run with every `go test`.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/kube-openapi/pkg/validation/strfmt"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/meterpoints"
	"github.com/flexsite/flexsite/internal/app/rewards"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/meterstore"
	"github.com/flexsite/flexsite/internal/pagestore"
	"github.com/flexsite/flexsite/internal/rewardstore"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
	"github.com/flexsite/flexsite/internal/web/webtest"
)

// fuzzNow is the fuzz API's clock: fixed, so that installation dates judge alike in every run.
var fuzzNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fuzzAPI is a REST API whose use cases read from a store that every read fails.
func fuzzAPI() *API {
	store := webtest.UnreachableStore{}
	now := func() time.Time { return fuzzNow }
	households := app.New(app.Config{Log: logr.Discard(), Cache: store, APIReader: store, Now: now})
	down := webtest.DownDatabase()
	rewardsSvc := rewards.New(rewards.Config{Log: logr.Discard(), Sites: households, APIReader: store, Cache: store, Now: now,
		Store: &rewardstore.Store{Pool: down}, Private: &pagestore.Store{Pool: down}})
	return New(Config{
		Log:        logr.Discard(),
		Households: households,
		Rewards:    rewardsSvc,
		Meters:     &meterpoints.Service{Log: logr.Discard(), Register: &meterstore.Store{Pool: down}},
		Guard: &web.Authenticator{Log: logr.Discard(), Limits: web.NewLimiters(web.Limits{}),
			Authenticator: auth.NewAuthenticator(store, store)},
		Now: now,
	})
}

// validMPAN: the MPAN is well formed.
func validMPAN(mpan string) bool {
	_, err := validation.NormaliseMPAN(mpan)
	return err == nil
}

// fuzzPrincipal is the organisation the handlers act for.
var fuzzPrincipal = &auth.Principal{Kind: auth.KindOrganisation, Namespace: "org-fuzz", ClientName: "fuzz",
	Username: "fuzz", Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards,
		flexv1.RoleComponents}}

var (
	jsonRequest = webtest.JSONRequest
	checkAnswer = webtest.CheckAnswer
	sameAnswer  = webtest.SameAnswer
)

// invalid is the 422 of items (nil when there are none).
func invalid(items []app.FieldError) error {
	if len(items) == 0 {
		return nil
	}
	return app.InvalidFields(items...)
}

// badEmail reports whether the use cases refuse a site's email with a 400 (not a 422), as the
// production service does.
func badEmail(in app.SiteInput) bool {
	return in.Email != nil && *in.Email != "" && validation.ValidateEmail(*in.Email) != nil
}

// checkEmailAnswer fails unless the handler answered a site with a bad email with a 400 whose
// detail is a message, and one with a good email by reaching the store.
func checkEmailAnswer(t *testing.T, got webtest.Outcome, in app.SiteInput) {
	t.Helper()
	if !badEmail(in) {
		sameAnswer(t, got, nil)
		return
	}
	if got.Reached {
		t.Fatalf("email %q reached the store", *in.Email)
	}
	if _, isMsg := got.Err.Detail.(string); got.Err.Status != http.StatusBadRequest || !isMsg {
		t.Fatalf("a bad email %q answers %v, want a 400 with a message", *in.Email, got.Err)
	}
}

// The CRD schemas' constraints on the fields the API writes (config/crd/bases).
var (
	mpanPattern     = regexp.MustCompile(`^[0-9]{13}$`)
	postcodePattern = regexp.MustCompile(`^([A-Z]{1,2}[0-9][A-Z0-9]? [0-9][A-Z]{2}|GIR 0AA)$`)
	datePattern     = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
)

func maxRunes(t *testing.T, what, s string, n int) {
	t.Helper()
	if utf8.RuneCountInString(s) > n {
		t.Fatalf("%s has %d characters, the CRD stores at most %d", what, utf8.RuneCountInString(s), n)
	}
}

func checkMPAN(t *testing.T, what, mpan string) {
	t.Helper()
	if !mpanPattern.MatchString(mpan) || validation.MPANCheckDigit(mpan[:12]) != int(mpan[12]-'0') {
		t.Fatalf("%s %q accepted", what, mpan)
	}
}

// checkStorableTime fails unless a timestamp the API accepted serialises as the API server's
// date-time format accepts it (metav1.Time stores UTC, RFC 3339, years 0000-9999).
func checkStorableTime(t *testing.T, what string, ts time.Time) {
	t.Helper()
	data, err := json.Marshal(metav1.Time{Time: ts.UTC()})
	if err != nil {
		t.Fatalf("%s %v does not serialise: %v", what, ts, err)
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil || !strfmt.IsDateTime(s) {
		t.Fatalf("%s %v is accepted but stored as %s, which the CRD's format: date-time refuses (the API server "+
			"answers 422 Invalid, the REST API a 500)", what, ts.Format(time.RFC3339), data)
	}
}

func checkStorableSite(t *testing.T, in app.SiteInput, loc string) {
	t.Helper()
	checkMPAN(t, loc+".mpan", in.MPAN)
	if in.Postcode == nil || !postcodePattern.MatchString(*in.Postcode) {
		t.Fatalf("%s.postcode %v accepted outside the CRD pattern", loc, in.Postcode)
	}
	if in.StreetAddress != nil {
		maxRunes(t, loc+".street_address", *in.StreetAddress, 512)
	}
	if in.Email != nil {
		maxRunes(t, loc+".email", *in.Email, 254)
	}
	maxRunes(t, loc+".external_user_id", in.ExternalUserID, 256)
	if in.Consent != nil {
		checkStorableTime(t, loc+".gave_boundary_meter_consent_at", *in.Consent)
	}
	name := identity.SiteNameForMPAN(in.MPAN)
	if errs := k8svalidation.IsDNS1123Subdomain(name); len(errs) > 0 {
		t.Fatalf("site name %q: %v", name, errs)
	}
	for _, p := range flexv1.AllPropositions {
		if errs := k8svalidation.IsDNS1123Subdomain(identity.EnrolmentName(name, p)); len(errs) > 0 {
			t.Fatalf("enrolment name of %q: %v", name, errs)
		}
	}
}

func checkStorableAsset(t *testing.T, a app.AssetInput, loc string) {
	t.Helper()
	if strings.TrimSpace(a.ExternalID) == "" {
		t.Fatalf("%s.external_id %q accepted", loc, a.ExternalID)
	}
	maxRunes(t, loc+".external_id", a.ExternalID, 256)
	if !slices.Contains(flexv1.CreatableAssetTypes, a.Type) {
		t.Fatalf("%s.type %q accepted", loc, a.Type)
	}
	for what, v := range map[string]*float64{"power_kw": a.PowerKW, "capacity_kwh": a.CapacityKWh} {
		if v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0) {
			t.Fatalf("%s.properties.%s %v accepted", loc, what, *v)
		}
	}
	if a.Model != nil {
		maxRunes(t, loc+".asset_model", *a.Model, 256)
	}
	if a.SerialNumber != nil {
		maxRunes(t, loc+".serial_number", *a.SerialNumber, 256)
	}
	if a.InstallationDate != nil {
		if !datePattern.MatchString(*a.InstallationDate) {
			t.Fatalf("%s.installation_date %q accepted outside the CRD pattern", loc, *a.InstallationDate)
		}
		if d, err := time.Parse(time.DateOnly, *a.InstallationDate); err != nil || d.After(fuzzNow) {
			t.Fatalf("%s.installation_date %q accepted (%v)", loc, *a.InstallationDate, err)
		}
	}
	name := identity.AssetName(a.ExternalID)
	if errs := k8svalidation.IsDNS1123Subdomain(name); len(errs) > 0 {
		t.Fatalf("asset name %q of %q: %v", name, a.ExternalID, errs)
	}
}

// checkIdempotent stores what req creates the way the API server does (JSON, metav1.Time in
// whole seconds) and merges req into the stored objects again: a repeated request changes
// nothing, so it reports no fields_updated and writes nothing.
func checkIdempotent(t *testing.T, req app.UpsertInput) {
	t.Helper()
	site := household.NewSite("org-fuzz", identity.SiteNameForMPAN(req.Site.MPAN))
	site.Spec.MPAN = req.Site.MPAN
	household.MergeSite(&site.Spec, req.Site.SiteFields)
	stored := &flexv1.Site{}
	roundTrip(t, site, stored)
	if changed := household.MergeSite(&stored.Spec, req.Site.SiteFields); len(changed) > 0 {
		t.Fatalf("the same site again changes %v: stored %+v, request %+v", changed, stored.Spec, req.Site)
	}
	for _, a := range req.Assets {
		asset := household.NewAsset(site, a.ExternalID, a.Type) // as the use case creates it
		household.MergeAsset(&asset.Spec, a.AssetFields)
		storedAsset := &flexv1.Asset{}
		roundTrip(t, asset, storedAsset)
		if changed := household.MergeAsset(&storedAsset.Spec, a.AssetFields); len(changed) > 0 {
			t.Fatalf("the same asset %q again changes %v", a.ExternalID, changed)
		}
	}
}

func roundTrip(t *testing.T, in, out any) {
	t.Helper()
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
}

func checkStorableUpsert(t *testing.T, req app.UpsertInput) {
	t.Helper()
	checkIdempotent(t, req)
	checkStorableSite(t, req.Site, "body.site")
	if len(req.Assets) == 0 || len(req.Assets) > app.MaxAssetsPerCall {
		t.Fatalf("%d assets accepted", len(req.Assets))
	}
	seen := map[string]bool{}
	for i, a := range req.Assets {
		checkStorableAsset(t, a, fmt.Sprintf("body.assets[%d]", i))
		if seen[a.ExternalID] {
			t.Fatalf("duplicate external_id %q accepted", a.ExternalID)
		}
		seen[a.ExternalID] = true
	}
}

// householdJSON is the suite's household() onboard body (mpan 1200000000011) as JSON.
const householdJSON = `{"site":{"mpan":"1200000000011","postcode":"SW1A 1AA","street_address":"10 Downing Street",` +
	`"email":"resident@example.com","gave_boundary_meter_consent_at":"2026-01-15T10:30:00Z"},` +
	`"assets":[{"external_id":"charger-1200000000011","type":"charger","asset_model":"zappi",` +
	`"installation_date":"2025-06-15","properties":{"power_kw":7.4}},` +
	`{"external_id":"battery-1200000000011","type":"battery","properties":{"power_kw":5,"capacity_kwh":13.5}}],` +
	`"proposition":"limited_pause"}`

// upsertSeeds are onboard/initialise bodies: valid ones and edge cases.
func upsertSeeds() []string {
	replace := func(old, repl string) string { return strings.Replace(householdJSON, old, repl, 1) }
	return []string{
		householdJSON,
		replace(`"proposition":"limited_pause"`, `"proposition":"price_curve","override_withdrawal":true`),
		replace(`"1200000000011","postcode"`, `"12 0000 0000 011","postcode"`),
		replace(`"SW1A 1AA"`, `"sw1a1aa"`),
		replace(`"2026-01-15T10:30:00Z"`, `"2026-01-15T10:30:00"`),
		replace(`"2026-01-15T10:30:00Z"`, `"2026-01-15T10:30:00.5+01:00"`),
		replace(`"2026-01-15T10:30:00Z"`, `"9999-12-31T23:59:59-01:00"`),
		replace(`"2026-01-15T10:30:00Z"`, `"0001-01-01T00:00:00+01:00"`),
		replace(`"power_kw":7.4`, `"power_kw":1e400`),
		replace(`"power_kw":7.4`, `"power_kw":-0`),
		replace(`"power_kw":7.4`, `"power_kw":"NaN"`),
		replace(`"power_kw":7.4`, `"power_kw":123456789012345678901234567890`),
		replace(`"installation_date":"2025-06-15"`, `"installation_date":"2026-03-02"`),
		replace(`"installation_date":"2025-06-15"`, `"installation_date":"2025-02-29"`),
		replace(`"type":"charger"`, `"type":"pv inverter"`),
		replace(`"battery-1200000000011"`, `"charger-1200000000011"`),
		replace(`"external_id":"charger-1200000000011"`, `"external_id":"ЭВ-зарядка ⚡ \u0000"`),
		replace(`"resident@example.com"`, `"not an email"`),
		replace(`"resident@example.com"`, `"resident@example.com","external_user_id":"user-42"`),
		replace(`"resident@example.com"`, `"resident@example.com","external_user_id":""`),
		replace(`"proposition":"limited_pause"`, `"proposition":"limited_pause","proposition":"nope"`),
		householdJSON + ` {}`,
		`{"site":null,"assets":[],"proposition":null,"override_withdrawal":"yes"}`,
		`{"site":[],"assets":{},"proposition":1}`,
		`{"assets":[1,"x",null,[],{}]}`,
		strings.Repeat(`{"a":`, 10001) + `1` + strings.Repeat(`}`, 10001),
		strings.Repeat(`[`, 2000),
		`[]`, `null`, `"x"`, `12`, ``, `{`, `{"site":{"mpan":"\ud800"}}`, "\xff\xfe{}",
	}
}

// fuzzUpsert is the body of the onboard and initialise targets: the decoder, the upsert
// fields (and, for onboard, proposition and override_withdrawal), then the real handler.
func fuzzUpsert(t *testing.T, a *API, data []byte, onboard bool) {
	handler := a.initialise
	if onboard {
		handler = a.onboard
	}
	_, herr := handler(jsonRequest(data), fuzzPrincipal)
	got := checkAnswer(t, herr, "body")

	body, err := web.DecodeJSON(jsonRequest(data))
	if err != nil {
		checkAnswer(t, err, "body")
		sameAnswer(t, got, err)
		return
	}
	f := &fields{}
	req := parseUpsert(f, body, fuzzNow)
	var prop flexv1.PropositionName
	if onboard {
		prop, _ = web.Enum(f, body, []any{"body"}, "proposition", true, flexv1.AllPropositions)
		_ = f.Boolean(body, []any{"body"}, "override_withdrawal")
	}
	if err := f.Err(); err != nil {
		checkAnswer(t, err, "body")
		sameAnswer(t, got, err)
		return
	}
	checkStorableUpsert(t, req)
	if onboard && !slices.Contains(flexv1.AllPropositions, prop) {
		t.Fatalf("proposition %q accepted", prop)
	}
	if v, ok := body["override_withdrawal"]; ok && v != nil {
		if _, isBool := v.(bool); !isBool {
			t.Fatalf("override_withdrawal %#v accepted", v)
		}
	}
	checkEmailAnswer(t, got, req.Site)
}

func FuzzDecodeJSONOnboard(f *testing.F) {
	for _, s := range upsertSeeds() {
		f.Add([]byte(s))
	}
	a := fuzzAPI()
	f.Fuzz(func(t *testing.T, data []byte) { fuzzUpsert(t, a, data, true) })
}

func FuzzInitialiseBody(f *testing.F) {
	for _, s := range upsertSeeds() {
		f.Add([]byte(s))
	}
	a := fuzzAPI()
	f.Fuzz(func(t *testing.T, data []byte) { fuzzUpsert(t, a, data, false) })
}

// legacyJSON is a valid body of the deprecated POST /entities/site/onboard-site-and-asset.
const legacyJSON = `{"site":{"mpan":"2301234567894","postcode":"M1 1AE","street_address":"1 Legacy Road",` +
	`"gave_boundary_meter_consent_at":"2026-01-15T10:30:00Z"},` +
	`"asset":{"external_id":"legacy-1","type":"battery","properties":{"power_kw":5,"capacity_kwh":13.5}},` +
	`"dispatch_consent":{"dispatch_methods":["limited_pause","cm_infrequent_dispatch"]}}`

// FuzzLegacyOnboardBody fuzzes the deprecated onboard, whose parsing is inline in its handler:
// the handler runs as is, and the pieces it is made of (parseSite, parseAsset, the dispatch
// method enum) check what it accepted.
func FuzzLegacyOnboardBody(f *testing.F) {
	replace := func(old, repl string) string { return strings.Replace(legacyJSON, old, repl, 1) }
	for _, s := range []string{
		legacyJSON,
		replace(`["limited_pause","cm_infrequent_dispatch"]`, `[]`),
		replace(`["limited_pause","cm_infrequent_dispatch"]`, `["limited_pause","limited_pause"]`),
		replace(`["limited_pause","cm_infrequent_dispatch"]`, `[null,1,"nope",{"m":"limited_pause"}," "]`),
		replace(`["limited_pause","cm_infrequent_dispatch"]`, `"limited_pause"`),
		replace(`"dispatch_consent":{`, `"dispatch_consent":{"m":"x",`),
		replace(`"asset":{`, `"asset":[{`) + `]`,
		replace(`"2026-01-15T10:30:00Z"`, `"9999-12-31T23:30:00-00:31"`),
		replace(`"1 Legacy Road",`, `"1 Legacy Road","email":"not an email",`),
		`{"site":{},"asset":{},"dispatch_consent":{}}`,
		`{"site":{"mpan":""},"asset":{"external_id":""},"dispatch_consent":{"dispatch_methods":null}}`,
		`{}`, `[]`, `{"dispatch_consent":{"dispatch_methods":[` + strings.Repeat(`"x",`, 100) + `"y"]}}`,
	} {
		f.Add([]byte(s))
	}
	a := fuzzAPI()
	f.Fuzz(func(t *testing.T, data []byte) {
		_, herr := a.legacyOnboard(jsonRequest(data), fuzzPrincipal)
		got := checkAnswer(t, herr, "body")
		body, err := web.DecodeJSON(jsonRequest(data))
		if err != nil {
			checkAnswer(t, err, "body")
			sameAnswer(t, got, err)
			return
		}
		if !got.Reached {
			checkLegacyItems(t, body, got.Items())
			if got.Err.Status == http.StatusUnprocessableEntity {
				return
			}
		}
		// Accepted by the field readers: every piece must be valid and storable.
		f := &fields{}
		site, _ := f.Object(body, []any{"body"}, "site", true)
		asset, _ := f.Object(body, []any{"body"}, "asset", true)
		dispatch, _ := f.Object(body, []any{"body"}, "dispatch_consent", true)
		methods, _ := f.Array(dispatch, []any{"body", "dispatch_consent"}, "dispatch_methods", true)
		siteIn := parseSite(f, site, []any{"body", "site"}, fuzzNow)
		assetIn := parseAsset(f, asset, []any{"body", "asset"}, fuzzNow)
		for i, m := range methods {
			web.EnumValue(f, m, []any{"body", "dispatch_consent", "dispatch_methods", i}, allDispatchMethods)
		}
		if err := f.Err(); err != nil {
			t.Fatalf("the handler got past a body its parts refuse (%v): %v", err, got)
		}
		checkEmailAnswer(t, got, siteIn)
		checkStorableSite(t, siteIn, "body.site")
		checkStorableAsset(t, assetIn, "body.asset")
	})
}

// checkLegacyItems checks the 422 items of the legacy onboard point at what is wrong: a
// dispatch method item names the index of a method that is not one.
func checkLegacyItems(t *testing.T, body map[string]any, items []app.FieldError) {
	t.Helper()
	for _, it := range items {
		if len(it.Loc) < 2 {
			continue
		}
		switch it.Loc[1] {
		case "site", "asset", "dispatch_consent":
		default:
			t.Fatalf("item %+v names a field the legacy onboard does not take", it)
		}
		if len(it.Loc) != 4 || it.Loc[2] != "dispatch_methods" {
			continue
		}
		i, ok := it.Loc[3].(int)
		dispatch, _ := body["dispatch_consent"].(map[string]any)
		methods, _ := dispatch["dispatch_methods"].([]any)
		if !ok || i < 0 || i >= len(methods) {
			t.Fatalf("item %+v names no dispatch method of %v", it, methods)
		}
		if m, isStr := methods[i].(string); isStr && slices.Contains(allDispatchMethods, flexv1.DispatchMethod(m)) {
			t.Fatalf("item %+v refuses the valid method %q", it, m)
		}
	}
}

// FuzzFormBody fuzzes the form endpoints: web.DecodeForm with any content type and body, then
// the token form's and the component token's field readers, and both real handlers.
func FuzzFormBody(f *testing.F) {
	const formType = "application/x-www-form-urlencoded"
	for _, seed := range []struct{ ct, body string }{
		{formType, "username=demo&password=flexsite-demo&grant_type=password"},
		{formType, "username=demo&password=flexsite-demo"},
		{formType, "username=demo&password=x&grant_type=client_credentials"},
		{formType + "; charset=utf-8", "username=%F0%9F%94%91&password=%00&grant_type=password"},
		{formType, "username=&password=+"},
		{formType, "username=a&username=b&password=c;d"},
		{formType, "%zz=1&password=%"},
		{formType, "external_user_id=user-42&allowed_origin=https%3A%2F%2Fapp.example.com&user_email=a%40example.com" +
			"&gave_boundary_meter_consent_at=2026-01-15T10%3A30%3A00Z"},
		{formType, "external_user_id=u&allowed_origin=https%3A%2F%2Fapp.example.com%2Fpath%3Fq&user_email=x"},
		{formType, "external_user_id=u&allowed_origin=http%3A%2F%2Fuser%40host&gave_boundary_meter_consent_at=yesterday"},
		{formType, "external_user_id=u&allowed_origin=https%3A%2F%2Fa.b&gave_boundary_meter_consent_at=" +
			"9999-12-31T23%3A59%3A00-01%3A00"},
		{"application/json", `{"username":"demo","password":"x"}`},
		{"", "username=demo&password=x"},
		{"multipart/form-data; boundary=x", "--x--"},
		{"application/x-www-form-urlencoded; =", "a=b"},
		{formType, strings.Repeat("a=b&", 1000)},
	} {
		f.Add(seed.ct, []byte(seed.body))
	}
	a := fuzzAPI()
	f.Fuzz(func(t *testing.T, contentType string, data []byte) {
		request := func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(data))
			r.Header["Content-Type"] = []string{contentType}
			return r
		}
		body, derr := web.DecodeForm(request())
		if derr != nil {
			checkAnswer(t, derr, "body")
		}

		// The token form, through its real handler (a 500 means it reached the store).
		rec := httptest.NewRecorder()
		a.tokenForm(rec, request())
		want := derr
		var username, password string
		if derr == nil {
			fl := &fields{}
			username, _ = fl.Str(body, []any{"body"}, "username", true)
			password, _ = fl.Str(body, []any{"body"}, "password", true)
			if gt, ok := fl.Str(body, []any{"body"}, "grant_type", false); ok && gt != "password" {
				fl.Add("String should match pattern '^password$'", "string_pattern_mismatch", []any{"body", "grant_type"})
			}
			want = fl.Err()
		}
		checkRendered(t, rec, want)
		// A password long enough not to occur by chance in a fixed message must not be echoed.
		if len(password) >= 16 && strings.Contains(rec.Body.String(), password) && !strings.Contains(username, password) {
			t.Fatalf("the answer %q echoes the password", rec.Body.String())
		}

		// The component token.
		_, herr := a.componentToken(request(), fuzzPrincipal)
		got := checkAnswer(t, herr, "body")
		if derr != nil {
			sameAnswer(t, got, derr)
			return
		}
		fl := &fields{}
		externalUserID, _ := fl.Str(body, []any{"body"}, "external_user_id", true)
		origin, originOK := fl.Str(body, []any{"body"}, "allowed_origin", true)
		email, _ := fl.Str(body, []any{"body"}, "user_email", false)
		consentAt := consent(fl, body, []any{"body"}, false, fuzzNow)
		if !got.Reached {
			return // refused with a well-formed 4xx: what exactly is the suite's business
		}
		if err := fl.Err(); err != nil {
			t.Fatalf("the component token accepted a form its field readers refuse: %v", err)
		}
		if _, err := validation.WebOrigin(origin); !originOK || err != nil {
			t.Fatalf("allowed_origin %q accepted", origin)
		}
		if email = strings.TrimSpace(email); email != "" && validation.ValidateEmail(email) != nil {
			t.Fatalf("user_email %q accepted", email)
		}
		maxRunes(t, "body.external_user_id", externalUserID, 256)
		maxRunes(t, "body.user_email", email, 254)
		if consentAt != nil {
			checkStorableTime(t, "body.gave_boundary_meter_consent_at", *consentAt)
		}
	})
}

// checkRendered checks an answer the handler wrote itself: want nil means it must have
// reached the store (the store's error is rendered as a 500), else the answer is want's.
func checkRendered(t *testing.T, rec *httptest.ResponseRecorder, want error) {
	t.Helper()
	if want == nil {
		if rec.Code != http.StatusInternalServerError {
			t.Fatalf("the decoder accepts the form, but the handler answers %d %s", rec.Code, rec.Body)
		}
		return
	}
	out := checkAnswer(t, want, "body")
	wantRec := httptest.NewRecorder()
	web.WriteError(logr.Discard(), wantRec, httptest.NewRequest(http.MethodGet, "/", nil), want)
	var got, expected map[string]any
	if json.Unmarshal(rec.Body.Bytes(), &got) != nil || json.Unmarshal(wantRec.Body.Bytes(), &expected) != nil ||
		rec.Code != out.Err.Status || !reflect.DeepEqual(got["detail"], expected["detail"]) {
		t.Fatalf("the handler answers %d %s, the decoder %d %s", rec.Code, rec.Body, wantRec.Code, wantRec.Body)
	}
	// The token endpoint also says what failed in RFC 6749's words (section 5.2).
	if code := got["error"]; code != "invalid_request" && code != "unsupported_grant_type" {
		t.Fatalf("the token endpoint's 4xx %s has no RFC 6749 error code", rec.Body)
	}
}

// pagingParams are the (key, default, lo, hi) of every paged endpoint's query parameters.
// listSites: GET /entities/site and GET /entities/asset, which page alike.
var pagingParams = []struct {
	key             string
	def, lo, hi     int
	listSites, txns bool
}{
	{"limit", 10, 1, 5000, true, false},
	{"offset", 0, 0, -1, true, true},
	{"limit", 100, 1, 1000, false, true},
}

// FuzzQueryInt fuzzes the paging parameters: QueryInt on the parsed query, paging, and the
// real site and asset lists and the transactions handler on the same query. (The page window
// the use cases cut from the bounds accepted here is internal/app's FuzzPagingWindow.)
func FuzzQueryInt(f *testing.F) {
	for _, q := range []string{
		"", "limit=10&offset=0", "limit=5000", "limit=5001", "limit=0", "offset=-1", "limit=1e3", "limit=%2B7",
		"limit=9223372036854775808", "offset=9223372036854775807&limit=5000", "offset=9223372036854775807&limit=1", "limit=&offset=",
		"limit=1&limit=x", "limit=٣", "limit= 1", "limit=0x10", "limit=1_000", "mpan=12%2000&postcode=sw1a1aa", "%zz", "limit=-0",
	} {
		f.Add(q)
	}
	a := fuzzAPI()
	f.Fuzz(func(t *testing.T, rawQuery string) {
		q, _ := url.ParseQuery(rawQuery) // as r.URL.Query() does: the parts that parse
		request := func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.URL.RawQuery = rawQuery
			r.SetPathValue("site_id", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e")
			return r
		}
		var listItems, txnItems []app.FieldError
		for _, p := range pagingParams {
			fl := &fields{}
			n := fl.QueryInt(q, p.key, p.def, p.lo, p.hi)
			items := fl.Items()
			raw := q.Get(p.key)
			parsed, perr := strconv.Atoi(raw)
			inRange := perr == nil && parsed >= p.lo && (p.hi < 0 || parsed <= p.hi)
			switch {
			case raw == "":
				if n != p.def || len(items) > 0 {
					t.Fatalf("%s absent: got %d (%v), want the default %d", p.key, n, items, p.def)
				}
			case inRange:
				if n != parsed || len(items) > 0 {
					t.Fatalf("%s=%q: got %d (%v)", p.key, raw, n, items)
				}
			default:
				if n != p.def || len(items) != 1 || !reflect.DeepEqual(items[0].Loc, []any{"query", p.key}) {
					t.Fatalf("%s=%q: got %d, items %v", p.key, raw, n, items)
				}
				checkAnswer(t, fl.Err(), "query")
			}
			if p.listSites {
				listItems = append(listItems, items...)
			}
			if p.txns {
				txnItems = append(txnItems, items...)
			}
		}
		_, herr := a.listSites(request(), fuzzPrincipal)
		sameAnswer(t, checkAnswer(t, herr, "query"), invalid(listItems))
		_, herr = a.listAssets(request(), fuzzPrincipal)
		sameAnswer(t, checkAnswer(t, herr, "query"), invalid(listItems))
		if len(listItems) == 0 {
			fl := &fields{}
			pg := paging(fl, q)
			if len(fl.Items()) > 0 || pg.Limit < 1 || pg.Limit > maxPageLimit || pg.Offset < 0 {
				t.Fatalf("paging(%q) = %+v (%v)", rawQuery, pg, fl.Items())
			}
		}
		_, herr = a.transactions(request(), fuzzPrincipal)
		sameAnswer(t, checkAnswer(t, herr, "query"), invalid(txnItems))
	})
}

// FuzzPathIDs fuzzes the ids of the path: every handler that takes {site_id} or {asset_id}
// answers a malformed one with a 422 at ["path", <name>] before reading anything, and reaches
// the store with a well-formed one.
func FuzzPathIDs(f *testing.F) {
	for _, s := range []string{
		"8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e", "8F14E45F-CEEA-467A-9AF0-6B1F2A3C4D5E", "", "..", "%2e%2e",
		"8f14e45fceea467a9af06b1f2a3c4d5e", "{8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e}", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5é",
		"8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e\x00", "../../rewards", "mpan-1200000000011", "\xff",
	} {
		f.Add(s)
	}
	a := fuzzAPI()
	f.Fuzz(func(t *testing.T, raw string) {
		_, perr := validation.ParseUUID(raw)
		for _, rt := range []struct {
			name  string
			param string
			h     web.Handler
			body  string // a valid body, for a handler that reads one
		}{
			{"delete site", "site_id", a.deleteSite, ""},
			{"eligibility", "site_id", a.eligibility, ""},
			{"get site", "site_id", a.getSite, ""},
			{"patch site", "site_id", a.patchSite, "{}"},
			{"offboard", "site_id", a.offboard, ""},
			{"unenrol", "site_id", a.unenrol, `{"proposition":"limited_pause"}`},
			{"meter consent", "site_id", a.meterConsent, `{"gave_boundary_meter_consent_at":"2026-01-15T10:30:00Z"}`},
			{"dispatch consent", "site_id", a.dispatchConsent, `{"dispatch_methods":["limited_pause"]}`},
			{"transactions", "site_id", a.transactions, ""},
			{"reward info", "site_id", a.rewardInfo, ""},
			{"get asset", "asset_id", a.getAsset, ""},
			{"update asset", "asset_id", a.updateAsset, "{}"},
			{"delete asset", "asset_id", a.deleteAsset, ""},
		} {
			r := httptest.NewRequest(http.MethodGet, "/", strings.NewReader(rt.body))
			r.SetPathValue(rt.param, raw)
			_, err := rt.h(r, fuzzPrincipal)
			got := checkAnswer(t, err, "path")
			if perr == nil {
				if !got.Reached {
					t.Fatalf("%s: a well-formed id %q answers %v", rt.name, raw, got.Err)
				}
				continue
			}
			items := got.Items()
			if got.Reached || len(items) != 1 || !reflect.DeepEqual(items[0].Loc, []any{"path", rt.param}) ||
				items[0].Type != "uuid_parsing" {
				t.Fatalf("%s: malformed id %q answered %+v", rt.name, raw, got)
			}
		}
		// The body's site_id of POST /entities/asset is a path-like id too, at ["body", "site_id"].
		// (json.Marshal spells invalid UTF-8 as U+FFFD: no UUID either way.)
		id, _ := json.Marshal(raw)
		_, err := a.createAsset(jsonRequest([]byte(`{"external_id":"e1","type":"battery","site_id":`+string(id)+`}`)), fuzzPrincipal)
		got := checkAnswer(t, err, "body")
		if (perr == nil) != got.Reached {
			t.Fatalf("create asset at site_id %q: %+v, ParseUUID: %v", raw, got, perr)
		}
		if items := got.Items(); !got.Reached && (len(items) != 1 || !reflect.DeepEqual(items[0].Loc, []any{"body", "site_id"})) {
			t.Fatalf("create asset at site_id %q answered %+v", raw, got)
		}
	})
}

// FuzzSiteActionBodies fuzzes the other JSON bodies: enrol, unenrol, meter consent, create
// asset and MPAN validation (which picks the endpoint: its value modulo 5).
func FuzzSiteActionBodies(f *testing.F) {
	for _, seed := range []struct {
		which uint8
		body  string
	}{
		{0, `{"proposition":"limited_pause"}`},
		{0, `{"proposition":"price_curve","override_withdrawal":true,"gave_boundary_meter_consent_at":"2026-01-15T10:30:00Z"}`},
		{0, `{"proposition":"limited pause","override_withdrawal":1}`},
		{0, `{"proposition":"limited_pause","gave_boundary_meter_consent_at":"9999-12-31T23:59:59-23:59"}`},
		{1, `{"proposition":"full_asset_schedule_control"}`},
		{1, `{"proposition":null}`},
		{2, `{"gave_boundary_meter_consent_at":"2026-01-15T10:30:00+01:00"}`},
		{2, `{"gave_boundary_meter_consent_at":"2026-01-15"}`},
		{2, `{"gave_boundary_meter_consent_at":"9999-12-31T23:00:00-01:00"}`},
		{3, `{"external_id":"e1","type":"battery","site_id":"8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"}`},
		{3, `{"external_id":"e1","type":"battery","site_id":"nope","properties":{"power_kw":-1}}`},
		{3, `{"external_id":" ","type":"boundary meter","site_id":""}`},
		{4, `{"mpan":"1200000000011"}`},
		{4, `{"mpan":"1234567890123"}`},
		{4, `{"mpan":12}`},
		{4, `{}`},
	} {
		f.Add(seed.which, []byte(seed.body))
	}
	a := fuzzAPI()
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		r := jsonRequest(data)
		r.SetPathValue("site_id", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e")
		handlers := []web.Handler{a.enrol, a.unenrol, a.meterConsent, a.createAsset, a.validateMPAN}
		which %= uint8(len(handlers))
		_, herr := handlers[which](r, fuzzPrincipal)
		if which == 4 && errors.Is(herr, meterpoints.ErrRegisterUnavailable) {
			// MPAN validation reads the register (here down: 503) only for a well-formed MPAN.
			body, _ := web.DecodeJSON(jsonRequest(data))
			if mpan, _ := body["mpan"].(string); !validMPAN(mpan) {
				t.Fatalf("MPAN %q reached the register", mpan)
			}
			return
		}
		got := checkAnswer(t, herr, "body")
		if !got.Reached {
			return
		}
		// It reached the store: what it read must be valid and storable.
		body, err := web.DecodeJSON(jsonRequest(data))
		if err != nil {
			t.Fatalf("reached the store with a body web.DecodeJSON refuses: %v", err)
		}
		fl := &fields{}
		switch which {
		case 0, 1:
			if p, _ := body["proposition"].(string); !slices.Contains(flexv1.AllPropositions, flexv1.PropositionName(p)) {
				t.Fatalf("proposition %#v accepted", body["proposition"])
			}
			if which == 0 {
				if consentAt := consent(fl, body, []any{"body"}, false, fuzzNow); consentAt != nil {
					checkStorableTime(t, "body.gave_boundary_meter_consent_at", *consentAt)
				}
				if v, ok := body["override_withdrawal"]; ok && v != nil {
					if _, isBool := v.(bool); !isBool {
						t.Fatalf("override_withdrawal %#v accepted", v)
					}
				}
			}
		case 2:
			consentAt := consent(fl, body, []any{"body"}, true, fuzzNow)
			if consentAt == nil {
				t.Fatalf("meter consent without a consent timestamp accepted: %v", fl.Items())
			}
			checkStorableTime(t, "body.gave_boundary_meter_consent_at", *consentAt)
		case 3:
			checkStorableAsset(t, parseAsset(fl, body, []any{"body"}, fuzzNow), "body")
			if id, _ := body["site_id"].(string); !validation.IsUUID(id) {
				t.Fatalf("site_id %q reached the store", id)
			}
		}
		if err := fl.Err(); err != nil {
			t.Fatalf("reached the store with a body its field readers refuse: %v", err)
		}
	})
}

// FuzzCheckEligibilityBody fuzzes POST /entities/site/check-eligibility: the handler and the
// field readers agree, and a body it accepts names a valid, normalised MPAN (13 digits, check
// digit) and a model name the CRD could store.
func FuzzCheckEligibilityBody(f *testing.F) {
	for _, seed := range []string{
		`{"mpan":"1200000000011"}`,
		`{"mpan":"1200000000011","asset_model":"zappi"}`,
		`{"mpan":" 12 0000 0000 011 ","asset_model":""}`,
		`{"mpan":"1200000000011","asset_model":null}`,
		`{"mpan":"1234567890123","asset_model":"zappi"}`,
		`{"mpan":"120000000001１"}`,
		`{"mpan":"12000000000110"}`,
		`{"mpan":1200000000011}`,
		`{"mpan":"1200000000011","asset_model":["zappi"]}`,
		`{"mpan":"1200000000011","asset_model":"` + strings.Repeat("m", 257) + `"}`,
		`{"asset_model":"zappi"}`,
		`{"mpan":null}`, `{"mpan":""}`, `{}`, `[]`, `null`, `{"mpan":"1200000000011"} {}`, `{`,
	} {
		f.Add([]byte(seed))
	}
	a := fuzzAPI()
	f.Fuzz(func(t *testing.T, data []byte) {
		_, herr := a.checkEligibility(jsonRequest(data), fuzzPrincipal)
		got := checkAnswer(t, herr, "body")
		body, err := web.DecodeJSON(jsonRequest(data))
		if err != nil {
			checkAnswer(t, err, "body")
			sameAnswer(t, got, err)
			return
		}
		fl := &fields{}
		rawMPAN, mpanOK := fl.Str(body, []any{"body"}, "mpan", true)
		var mpan string
		if mpanOK {
			norm, err := validation.NormaliseMPAN(rawMPAN)
			if err != nil {
				fl.AddValidation(err, []any{"body", "mpan"})
			}
			mpan = norm
		}
		model, _ := fl.Str(body, []any{"body"}, "asset_model", false)
		if err := fl.Err(); err != nil {
			checkAnswer(t, err, "body")
			sameAnswer(t, got, err)
			return
		}
		sameAnswer(t, got, nil)
		checkMPAN(t, "mpan "+strconv.Quote(rawMPAN)+" normalised as", mpan)
		maxRunes(t, "body.asset_model", model, 256)
	})
}

// FuzzDispatchConsentBody fuzzes the body of dispatch-consent and dispatch-deconsent (which
// of the two: the first input): the handler and dispatchMethods agree; a 422 item points at the
// list, or at an item that is not a dispatch method or repeats an earlier one; what is accepted
// is a list of distinct dispatch methods, and consenting to it (or deconsenting from it) gives
// a list the CRD stores (an enum, a set, at most 8), which the same call again leaves alone.
func FuzzDispatchConsentBody(f *testing.F) {
	for _, seed := range []struct {
		deconsent bool
		body      string
	}{
		{false, `{"dispatch_methods":["limited_pause","cm_infrequent_dispatch"]}`},
		{true, `{"dispatch_methods":["vpp_limited_control"]}`},
		{false, `{"dispatch_methods":[]}`},
		{false, `{"dispatch_methods":["limited_pause","limited_pause"]}`},
		{true, `{"dispatch_methods":["full_asset_schedule_control","x","full_asset_schedule_control",null,3,["limited_pause"]]}`},
		{false, `{"dispatch_methods":"limited_pause"}`},
		{false, `{"dispatch_methods":null}`},
		{true, `{"dispatch_method":["limited_pause"]}`},
		{false, `{"dispatch_methods":["LIMITED_PAUSE"," limited_pause"]}`},
		{false, `{"dispatch_methods":[` + strings.Repeat(`"limited_pause",`, 50) + `"limited_pause"]}`},
		{true, `[]`}, {true, `{`}, {false, `{"dispatch_methods":[]} []`},
	} {
		f.Add(seed.deconsent, []byte(seed.body))
	}
	a := fuzzAPI()
	f.Fuzz(func(t *testing.T, deconsent bool, data []byte) {
		handler, change := a.dispatchConsent, app.DispatchChange(household.ConsentDispatch)
		if deconsent {
			handler, change = a.dispatchDeconsent, household.DeconsentDispatch
		}
		r := jsonRequest(data)
		r.SetPathValue("site_id", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e")
		_, herr := handler(r, fuzzPrincipal)
		got := checkAnswer(t, herr, "body")
		body, err := web.DecodeJSON(jsonRequest(data))
		if err != nil {
			checkAnswer(t, err, "body")
			sameAnswer(t, got, err)
			return
		}
		fl := &fields{}
		methods := dispatchMethods(fl, body, []any{"body"})
		if err := fl.Err(); err != nil {
			checkAnswer(t, err, "body")
			sameAnswer(t, got, err)
			checkDispatchItems(t, body, fl.Items())
			return
		}
		sameAnswer(t, got, nil)
		seen := map[flexv1.DispatchMethod]bool{}
		for _, m := range methods {
			if !slices.Contains(allDispatchMethods, m) || seen[m] {
				t.Fatalf("dispatch methods %v accepted", methods)
			}
			seen[m] = true
		}
		// On every stored set of methods (subsets of the four, in a fixed order), the change
		// gives a storable list and is a fixed point.
		for mask := range 1 << len(allDispatchMethods) {
			spec := flexv1.SiteSpec{}
			for i, m := range allDispatchMethods {
				if mask&(1<<i) != 0 {
					spec.DispatchMethods = append(spec.DispatchMethods, m)
				}
			}
			change(&spec, methods)
			if len(spec.DispatchMethods) > 8 {
				t.Fatalf("%d dispatch methods stored", len(spec.DispatchMethods))
			}
			stored := map[flexv1.DispatchMethod]bool{}
			for _, m := range spec.DispatchMethods {
				if !slices.Contains(allDispatchMethods, m) || stored[m] {
					t.Fatalf("stored dispatch methods %v: not a set of the enum", spec.DispatchMethods)
				}
				stored[m] = true
			}
			if again := change(spec.DeepCopy(), methods); again != nil {
				t.Fatalf("the same change again changes %v", again)
			}
		}
	})
}

// checkDispatchItems checks the 422 items of a dispatch consent body: each names the list, or
// one of its items that is not a dispatch method or repeats an earlier one.
func checkDispatchItems(t *testing.T, body map[string]any, items []app.FieldError) {
	t.Helper()
	list, _ := body["dispatch_methods"].([]any)
	for _, it := range items {
		if len(it.Loc) < 2 || it.Loc[1] != "dispatch_methods" {
			t.Fatalf("item %+v names a field the body does not take", it)
		}
		if len(it.Loc) == 2 {
			continue
		}
		i, ok := it.Loc[2].(int)
		if len(it.Loc) != 3 || !ok || i < 0 || i >= len(list) {
			t.Fatalf("item %+v names no item of %v", it, list)
		}
		m, isStr := list[i].(string)
		valid := isStr && slices.Contains(allDispatchMethods, flexv1.DispatchMethod(m))
		repeated := valid && slices.IndexFunc(list[:i], func(v any) bool { return v == list[i] }) >= 0
		if valid && !repeated {
			t.Fatalf("item %+v refuses the valid, first %q", it, m)
		}
	}
}

// assetUpdateJSON is a valid PATCH /entities/asset/{asset_id} body (AssetUpdateRequest).
const assetUpdateJSON = `{"properties":{"power_kw":7.4,"capacity_kwh":13.5},"asset_model":"zappi",` +
	`"installation_date":"2025-06-15"}`

// FuzzAssetUpdateBody fuzzes PATCH /entities/asset/{asset_id}: the path's id and the body
// through the real handler, against what the id reader, the decoder and parseAssetFields
// predict (one 422 naming the path's and the body's problems alike). What reaches the store
// must be storable, and merged twice changes nothing the second time (a repeat writes nothing).
func FuzzAssetUpdateBody(f *testing.F) {
	const id = "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"
	replace := func(old, repl string) string { return strings.Replace(assetUpdateJSON, old, repl, 1) }
	for _, seed := range []struct{ id, body string }{
		{id, assetUpdateJSON},
		{id, `{}`},
		{id, `{"properties":{}}`},
		{id, `{"properties":null,"asset_model":null,"installation_date":null}`},
		{id, `{"asset_model":"","properties":{"power_kw":-0}}`},
		{id, replace(`"2025-06-15"`, `""`)},
		{id, replace(`"2025-06-15"`, `"2026-03-02"`)},
		{id, replace(`"2025-06-15"`, `"2025-02-29"`)},
		{id, replace(`7.4`, `1e400`)},
		{id, replace(`7.4`, `"7.4"`)},
		{id, replace(`13.5`, `9000000000000001`)},
		{id, replace(`"zappi"`, `["zappi"]`)},
		{id, `{"properties":[1],"type":"charger","site_id":"x","serial_number":5}`},
		{id, `[]`}, {id, `{`}, {id, ``}, {id, `null`}, {id, assetUpdateJSON + `{}`},
		{"not-a-uuid", assetUpdateJSON},
		{"", `{"properties":{"power_kw":-1}}`},
		{"8F14E45F-CEEA-467A-9AF0-6B1F2A3C4D5E", `{"asset_model":"` + strings.Repeat("m", 257) + `"}`},
	} {
		f.Add(seed.id, []byte(seed.body))
	}
	a := fuzzAPI()
	f.Fuzz(func(t *testing.T, rawID string, data []byte) {
		request := func() *http.Request {
			r := jsonRequest(data)
			r.SetPathValue("asset_id", rawID)
			return r
		}
		_, herr := a.updateAsset(request(), fuzzPrincipal)
		got := checkAnswer(t, herr, "path", "body")

		fl := &fields{}
		fl.UUIDParam(request(), "asset_id")
		body, err := web.DecodeJSON(jsonRequest(data))
		if err != nil {
			want := fl.Join(err)
			checkAnswer(t, want, "path", "body")
			sameAnswer(t, got, want)
			return
		}
		in := parseAssetFields(fl, body, []any{"body"}, fuzzNow)
		want := fl.Err()
		if want != nil {
			checkAnswer(t, want, "path", "body")
		}
		sameAnswer(t, got, want)
		if want != nil {
			return
		}
		// Accepted: storable, and a repeat changes nothing.
		if !validation.IsUUID(rawID) {
			t.Fatalf("asset_id %q reached the store", rawID)
		}
		checkStorableAsset(t, app.AssetInput{ExternalID: "e1", Type: flexv1.AssetTypeBattery, AssetFields: in}, "body")
		asset := household.NewAsset(&flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: "org-fuzz", Name: "site"}}, "e1", flexv1.AssetTypeBattery)
		household.MergeAsset(&asset.Spec, in)
		stored := &flexv1.Asset{}
		roundTrip(t, asset, stored)
		if changed := household.MergeAsset(&stored.Spec, in); len(changed) > 0 {
			t.Fatalf("the same update again changes %v", changed)
		}
	})
}

// FuzzSiteUpdateBody fuzzes PATCH /entities/site/{site_id}: every body is a 4xx in the
// documented form or reaches the store with only values the CRD can hold.
func FuzzSiteUpdateBody(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"email":"new@example.com"}`,
		`{"mpan":"2301234567894","postcode":"sw1a1aa","address":"1 Road"}`,
		`{"mpan":"1234567890123"}`,
		`{"mpan":null,"email":null,"address":""}`,
		`{"tariff":{"tariff_type":"dual_rate","tariff_cheap_start_time":"00:30","tariff_cheap_end_time":"04:30"}}`,
		`{"tariff":{"tariff_type":"dual_rate","tariff_cheap_start_time":"24:00"}}`,
		`{"tariff":{"tariff_type":"smart"}}`,
		`{"tariff":[]}`,
		`{"email":" "}`,
	} {
		f.Add([]byte(seed))
	}
	a := fuzzAPI()
	f.Fuzz(func(t *testing.T, data []byte) {
		r := jsonRequest(data)
		r.SetPathValue("site_id", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e")
		_, herr := a.patchSite(r, fuzzPrincipal)
		if !checkAnswer(t, herr, "body").Reached {
			return
		}
		body, err := web.DecodeJSON(jsonRequest(data))
		if err != nil {
			t.Fatalf("reached the store with a body web.DecodeJSON refuses: %v", err)
		}
		fl := &fields{}
		in := parseSiteUpdate(fl, body)
		if err := fl.Err(); err != nil {
			t.Fatalf("reached the store with a body its field readers refuse: %v", err)
		}
		if in.MPAN != "" {
			checkMPAN(t, "mpan", in.MPAN)
		}
		if pc := in.Fields.Postcode; pc != nil && !postcodePattern.MatchString(*pc) {
			t.Fatalf("postcode %q accepted outside the CRD pattern", *pc)
		}
		if addr := in.Fields.StreetAddress; addr != nil {
			maxRunes(t, "body.address", *addr, 512)
		}
		if e := in.Fields.Email; e != nil {
			maxRunes(t, "body.email", *e, 254)
			if err := validation.ValidateEmail(*e); err != nil {
				t.Fatalf("email %q accepted: %v", *e, err)
			}
		}
		if tr := in.Fields.Tariff; tr != nil {
			if !slices.Contains(allTariffTypes, tr.Type) || (tr.CheapStartTime == "") != (tr.CheapEndTime == "") {
				t.Fatalf("tariff %+v accepted", tr)
			}
			for _, v := range []string{tr.CheapStartTime, tr.CheapEndTime} {
				if v != "" && !tariffTime.MatchString(v) {
					t.Fatalf("tariff time %q accepted", v)
				}
			}
		}
	})
}

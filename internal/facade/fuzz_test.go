package facade

// Fuzz targets for every request decoder of the facade. Each target feeds arbitrary input to
// the decoder and to the same field readers the handler uses, and also to the real handler,
// whose stores are unreachableStore: every read fails with errStoreReached. A request either
// ends in the documented 4xx answer before the handler reads anything, or it reaches the
// store, which proves every check before it passed. The invariants:
//
//   - no panic;
//   - every error is an *apiError with a 4xx status (never a 500), rendered as JSON
//     {"detail": ...}; a 422 validation record names at least one item, and every item's loc
//     starts with "body", "query" or "path" (whichever the input was);
//   - the handler and the decoder agree: the handler answers exactly the 422 the field
//     readers collect, and reaches the store only when they collected nothing;
//   - what the decoder accepts is storable: it satisfies the CRD schema of the object it
//     ends up in (patterns, lengths, formats, object names), so the API server cannot refuse
//     it (its refusal would be a 500);
//   - an upsert is idempotent: merged again into what it stored, it changes nothing.
//
// Run one with: go test -run='^$' -fuzz=FuzzDecodeJSONOnboard -fuzztime=20s ./internal/facade/
// Regression inputs live in testdata/fuzz/<FuzzName>/ and run with every `go test`.

import (
	"bytes"
	"context"
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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/validation"
)

// errStoreReached is what every read of unreachableStore fails with.
var errStoreReached = errors.New("fuzz: the request reached the store")

// unreachableStore is a reader that holds nothing and fails every read with errStoreReached:
// reaching it means a request passed every check the handler makes before its first read.
type unreachableStore struct{}

func (unreachableStore) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errStoreReached
}

func (unreachableStore) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errStoreReached
}

// fuzzNow is the fuzz servers' clock: fixed, so that installation dates judge alike in
// every run.
var fuzzNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fuzzServer is a facade whose stores are unreachable.
func fuzzServer() *Server {
	return NewServer(Config{
		Now:           func() time.Time { return fuzzNow },
		Cache:         unreachableStore{},
		APIReader:     unreachableStore{},
		Authenticator: auth.NewAuthenticator(unreachableStore{}, unreachableStore{}),
	})
}

// fuzzPrincipal is the organisation the handlers act for.
var fuzzPrincipal = &auth.Principal{Kind: auth.KindOrganisation, Namespace: "org-fuzz", ClientName: "fuzz",
	Username: "fuzz", Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards,
		flexv1.RoleComponents}}

func jsonRequest(data []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(data))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// outcome is how a handler ended: reached the store, or answered an *apiError.
type outcome struct {
	reached bool
	ae      *apiError
}

// checkAnswer checks that err is either errStoreReached or a well-formed 4xx *apiError whose
// validation items sit under one of roots, and renders it as writeError does.
func checkAnswer(t *testing.T, s *Server, err error, roots ...string) outcome {
	t.Helper()
	if err == nil {
		t.Fatal("the handler answered 200 without reading anything")
	}
	if errors.Is(err, errStoreReached) {
		return outcome{reached: true}
	}
	var ae *apiError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *apiError: the client would get a 500", err, err)
	}
	if ae.status < 400 || ae.status > 499 {
		t.Fatalf("status %d is not a 4xx: %v", ae.status, ae)
	}
	if items, ok := ae.detail.([]ValidationItem); ok {
		if ae.status != http.StatusUnprocessableEntity {
			t.Fatalf("a validation record with status %d", ae.status)
		}
		if len(items) == 0 {
			t.Fatal("a 422 validation record without items")
		}
		for _, it := range items {
			if len(it.Loc) == 0 || !slices.Contains(roots, fmt.Sprint(it.Loc[0])) {
				t.Fatalf("item %+v: loc does not start with one of %v", it, roots)
			}
			for _, part := range it.Loc {
				switch part.(type) {
				case string, int, int64:
				default:
					t.Fatalf("item %+v: loc part %v is a %T", it, part, part)
				}
			}
			if it.Msg == "" || it.Type == "" {
				t.Fatalf("item %+v: no msg or type", it)
			}
		}
	}
	// Rendered as the client sees it.
	rec := httptest.NewRecorder()
	s.writeError(rec, httptest.NewRequest(http.MethodGet, "/", nil), err)
	if rec.Code != ae.status {
		t.Fatalf("rendered with status %d, want %d", rec.Code, ae.status)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || len(body) != 1 || body["detail"] == nil {
		t.Fatalf("rendered body %q is not {\"detail\": ...} (%v)", rec.Body.Bytes(), err)
	}
	return outcome{ae: ae}
}

// sameAnswer fails unless the handler's answer is the one the field readers predict: want nil
// means the handler must reach the store.
func sameAnswer(t *testing.T, got outcome, want error) {
	t.Helper()
	if want == nil {
		if !got.reached {
			t.Fatalf("the decoder accepts the input, but the handler answers %v", got.ae)
		}
		return
	}
	var wantAE *apiError
	if !errors.As(want, &wantAE) {
		t.Fatalf("predicted error %v is not an *apiError", want)
	}
	if got.reached {
		t.Fatalf("the decoder refuses the input (%v), but the handler reached the store", want)
	}
	if got.ae.status != wantAE.status || !reflect.DeepEqual(sortedDetail(got.ae.detail), sortedDetail(wantAE.detail)) {
		t.Fatalf("the handler answers %v, the decoder %v", got.ae, wantAE)
	}
}

// sortedDetail orders a validation record's items: their order is not part of the contract.
func sortedDetail(detail any) any {
	items, ok := detail.([]ValidationItem)
	if !ok {
		return detail
	}
	items = slices.Clone(items)
	slices.SortFunc(items, func(a, b ValidationItem) int {
		return strings.Compare(fmt.Sprint(a.Loc, a.Type, a.Msg), fmt.Sprint(b.Loc, b.Type, b.Msg))
	})
	return items
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
			"answers 422 Invalid, the facade a 500)", what, ts.Format(time.RFC3339), data)
	}
}

func checkStorableSite(t *testing.T, in siteInput, loc string) {
	t.Helper()
	if !mpanPattern.MatchString(in.MPAN) || validation.MPANCheckDigit(in.MPAN[:12]) != int(in.MPAN[12]-'0') {
		t.Fatalf("%s.mpan %q accepted", loc, in.MPAN)
	}
	if in.Postcode == nil || !postcodePattern.MatchString(*in.Postcode) {
		t.Fatalf("%s.postcode %v accepted outside the CRD pattern", loc, in.Postcode)
	}
	if in.StreetAddress != nil {
		maxRunes(t, loc+".street_address", *in.StreetAddress, 512)
	}
	if in.Email != nil {
		maxRunes(t, loc+".email", *in.Email, 254)
	}
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

func checkStorableAsset(t *testing.T, a assetInput, loc string) {
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
func checkIdempotent(t *testing.T, req upsertRequest) {
	t.Helper()
	site := household.NewSite("org-fuzz", identity.SiteNameForMPAN(req.site.MPAN))
	site.Spec.MPAN = req.site.MPAN
	household.MergeSite(&site.Spec, req.site.SiteFields)
	stored := &flexv1.Site{}
	roundTrip(t, site, stored)
	if changed := household.MergeSite(&stored.Spec, req.site.SiteFields); len(changed) > 0 {
		t.Fatalf("the same site again changes %v: stored %+v, request %+v", changed, stored.Spec, req.site)
	}
	for _, a := range req.assets {
		asset := newAsset("org-fuzz", site.Name, a)
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

func checkStorableUpsert(t *testing.T, req upsertRequest) {
	t.Helper()
	checkIdempotent(t, req)
	checkStorableSite(t, req.site, "body.site")
	if len(req.assets) == 0 || len(req.assets) > MaxAssetsPerCall {
		t.Fatalf("%d assets accepted", len(req.assets))
	}
	seen := map[string]bool{}
	for i, a := range req.assets {
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
func fuzzUpsert(t *testing.T, s *Server, data []byte, onboard bool) {
	handler := s.initialise
	if onboard {
		handler = s.onboard
	}
	_, herr := handler(jsonRequest(data), fuzzPrincipal)
	got := checkAnswer(t, s, herr, "body")

	body, err := decodeJSON(jsonRequest(data))
	if err != nil {
		checkAnswer(t, s, err, "body")
		sameAnswer(t, got, err)
		return
	}
	f := &fields{}
	req := s.parseUpsert(f, body)
	var prop flexv1.PropositionName
	if onboard {
		prop, _ = enum(f, body, []any{"body"}, "proposition", true, flexv1.AllPropositions)
		_ = f.boolean(body, []any{"body"}, "override_withdrawal")
	}
	if err := f.err(); err != nil {
		checkAnswer(t, s, err, "body")
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
	emailErr := req.site.checkEmail()
	if emailErr != nil {
		if out := checkAnswer(t, s, emailErr); out.ae.status != http.StatusBadRequest {
			t.Fatalf("a bad email answers %d, want 400", out.ae.status)
		}
	}
	sameAnswer(t, got, emailErr)
}

func FuzzDecodeJSONOnboard(f *testing.F) {
	for _, s := range upsertSeeds() {
		f.Add([]byte(s))
	}
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, data []byte) { fuzzUpsert(t, s, data, true) })
}

func FuzzInitialiseBody(f *testing.F) {
	for _, s := range upsertSeeds() {
		f.Add([]byte(s))
	}
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, data []byte) { fuzzUpsert(t, s, data, false) })
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
		`{"site":{},"asset":{},"dispatch_consent":{}}`,
		`{"site":{"mpan":""},"asset":{"external_id":""},"dispatch_consent":{"dispatch_methods":null}}`,
		`{}`, `[]`, `{"dispatch_consent":{"dispatch_methods":[` + strings.Repeat(`"x",`, 100) + `"y"]}}`,
	} {
		f.Add([]byte(s))
	}
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, data []byte) {
		_, herr := s.legacyOnboard(jsonRequest(data), fuzzPrincipal)
		got := checkAnswer(t, s, herr, "body")
		body, err := decodeJSON(jsonRequest(data))
		if err != nil {
			checkAnswer(t, s, err, "body")
			sameAnswer(t, got, err)
			return
		}
		if !got.reached {
			if items, ok := got.ae.detail.([]ValidationItem); ok {
				checkLegacyItems(t, body, items)
			}
			return
		}
		// Accepted: every piece must be valid and storable.
		f := &fields{}
		site, _ := f.object(body, []any{"body"}, "site", true)
		asset, _ := f.object(body, []any{"body"}, "asset", true)
		consent, _ := f.object(body, []any{"body"}, "dispatch_consent", true)
		methods, _ := f.array(consent, []any{"body", "dispatch_consent"}, "dispatch_methods", true)
		siteIn := parseSite(f, site, []any{"body", "site"})
		assetIn := parseAsset(f, asset, []any{"body", "asset"}, fuzzNow)
		for i, m := range methods {
			enum(f, map[string]any{"m": m}, []any{"body", "dispatch_consent", "dispatch_methods", i}, "m", true,
				allDispatchMethods)
		}
		if err := f.err(); err != nil {
			t.Fatalf("the handler accepted a body its parts refuse: %v", err)
		}
		if err := siteIn.checkEmail(); err != nil {
			t.Fatalf("the handler accepted a bad email: %v", err)
		}
		checkStorableSite(t, siteIn, "body.site")
		checkStorableAsset(t, assetIn, "body.asset")
	})
}

// checkLegacyItems checks the 422 items of the legacy onboard point at what is wrong: a
// dispatch method item names the index of a method that is not one.
func checkLegacyItems(t *testing.T, body map[string]any, items []ValidationItem) {
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
		consent, _ := body["dispatch_consent"].(map[string]any)
		methods, _ := consent["dispatch_methods"].([]any)
		if !ok || i < 0 || i >= len(methods) {
			t.Fatalf("item %+v names no dispatch method of %v", it, methods)
		}
		if m, isStr := methods[i].(string); isStr && slices.Contains(allDispatchMethods, flexv1.DispatchMethod(m)) {
			t.Fatalf("item %+v refuses the valid method %q", it, m)
		}
	}
}

// FuzzFormBody fuzzes the form endpoints: decodeForm with any content type and body, then the
// token form's and the component token's field readers, and both real handlers.
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
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, contentType string, data []byte) {
		request := func() *http.Request {
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(data))
			r.Header["Content-Type"] = []string{contentType}
			return r
		}
		body, derr := decodeForm(request())
		if derr != nil {
			checkAnswer(t, s, derr, "body")
		}

		// The token form, through its real handler (a 500 means it reached the store).
		rec := httptest.NewRecorder()
		s.tokenForm(rec, request())
		want := derr
		var username, password string
		if derr == nil {
			fl := &fields{}
			username, _ = fl.str(body, []any{"body"}, "username", true)
			password, _ = fl.str(body, []any{"body"}, "password", true)
			if gt, ok := fl.str(body, []any{"body"}, "grant_type", false); ok && gt != "password" {
				fl.add("String should match pattern '^password$'", "string_pattern_mismatch", []any{"body", "grant_type"})
			}
			want = fl.err()
		}
		checkRendered(t, s, rec, want)
		// A password long enough not to occur by chance in a fixed message must not be echoed.
		if len(password) >= 16 && strings.Contains(rec.Body.String(), password) && !strings.Contains(username, password) {
			t.Fatalf("the answer %q echoes the password", rec.Body.String())
		}

		// The component token.
		_, herr := s.componentToken(request(), fuzzPrincipal)
		got := checkAnswer(t, s, herr, "body")
		if derr != nil {
			sameAnswer(t, got, derr)
			return
		}
		fl := &fields{}
		externalUserID, _ := fl.str(body, []any{"body"}, "external_user_id", true)
		origin, originOK := fl.str(body, []any{"body"}, "allowed_origin", true)
		email, _ := fl.str(body, []any{"body"}, "user_email", false)
		consent := fl.consent(body, []any{"body"}, false)
		if !got.reached {
			return // refused with a well-formed 4xx: what exactly is the suite's business
		}
		if err := fl.err(); err != nil {
			t.Fatalf("the component token accepted a form its field readers refuse: %v", err)
		}
		if !originOK || !isOrigin(origin) {
			t.Fatalf("allowed_origin %q accepted", origin)
		}
		if email = strings.TrimSpace(email); email != "" && validation.ValidateEmail(email) != nil {
			t.Fatalf("user_email %q accepted", email)
		}
		maxRunes(t, "body.external_user_id", externalUserID, 256)
		maxRunes(t, "body.user_email", email, 254)
		if consent != nil {
			checkStorableTime(t, "body.gave_boundary_meter_consent_at", *consent)
		}
	})
}

// checkRendered checks an answer the handler wrote itself: want nil means it must have
// reached the store (the store's error is rendered as a 500), else the answer is want's.
func checkRendered(t *testing.T, s *Server, rec *httptest.ResponseRecorder, want error) {
	t.Helper()
	if want == nil {
		if rec.Code != http.StatusInternalServerError {
			t.Fatalf("the decoder accepts the form, but the handler answers %d %s", rec.Code, rec.Body)
		}
		return
	}
	out := checkAnswer(t, s, want, "body")
	wantRec := httptest.NewRecorder()
	s.writeError(wantRec, httptest.NewRequest(http.MethodGet, "/", nil), want)
	var got, expected map[string]any
	if json.Unmarshal(rec.Body.Bytes(), &got) != nil || json.Unmarshal(wantRec.Body.Bytes(), &expected) != nil ||
		rec.Code != out.ae.status || !reflect.DeepEqual(got["detail"], expected["detail"]) {
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

// FuzzQueryInt fuzzes the paging parameters: queryInt on the parsed query, the real site and
// asset lists and the transactions handler on the same query, and the page window.
func FuzzQueryInt(f *testing.F) {
	for _, q := range []string{
		"", "limit=10&offset=0", "limit=5000", "limit=5001", "limit=0", "offset=-1", "limit=1e3", "limit=%2B7",
		"limit=9223372036854775808", "offset=9223372036854775807&limit=5000", "offset=9223372036854775807&limit=1", "limit=&offset=", "limit=1&limit=x",
		"limit=٣", "limit= 1", "limit=0x10", "limit=1_000", "mpan=12%2000&postcode=sw1a1aa", "%zz", "limit=-0",
	} {
		f.Add(q)
	}
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, rawQuery string) {
		q, _ := url.ParseQuery(rawQuery) // as r.URL.Query() does: the parts that parse
		request := func() *http.Request {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.URL.RawQuery = rawQuery
			r.SetPathValue("site_id", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e")
			return r
		}
		listF, txnF := &fields{}, &fields{}
		for _, p := range pagingParams {
			fl := &fields{}
			n := fl.queryInt(q, p.key, p.def, p.lo, p.hi)
			raw := q.Get(p.key)
			parsed, perr := strconv.Atoi(raw)
			inRange := perr == nil && parsed >= p.lo && (p.hi < 0 || parsed <= p.hi)
			switch {
			case raw == "":
				if n != p.def || len(fl.items) > 0 {
					t.Fatalf("%s absent: got %d (%v), want the default %d", p.key, n, fl.items, p.def)
				}
			case inRange:
				if n != parsed || len(fl.items) > 0 {
					t.Fatalf("%s=%q: got %d (%v)", p.key, raw, n, fl.items)
				}
			default:
				if n != p.def || len(fl.items) != 1 || !reflect.DeepEqual(fl.items[0].Loc, []any{"query", p.key}) {
					t.Fatalf("%s=%q: got %d, items %v", p.key, raw, n, fl.items)
				}
				checkAnswer(t, s, fl.err(), "query")
			}
			if p.listSites {
				listF.items = append(listF.items, fl.items...)
			}
			if p.txns {
				txnF.items = append(txnF.items, fl.items...)
			}
		}
		_, herr := s.listSites(request(), fuzzPrincipal)
		sameAnswer(t, checkAnswer(t, s, herr, "query"), listF.err())
		_, herr = s.listAssets(request(), fuzzPrincipal)
		sameAnswer(t, checkAnswer(t, s, herr, "query"), listF.err())
		if listF.err() == nil {
			limit, offset := (&fields{}).paging(q)
			for _, total := range []int{0, 1, limit - 1, limit, limit + 1, offset, offset + 1, 2*limit + 3} {
				if total >= 0 && total <= 1<<20 {
					checkPage(t, total, limit, offset)
				}
			}
		}
		// Transactions reads limit before offset.
		slices.Reverse(txnF.items)
		_, herr = s.transactions(request(), fuzzPrincipal)
		sameAnswer(t, checkAnswer(t, s, herr, "query"), txnF.err())
	})
}

// checkPage checks the window pageOf gives limit and offset over total items: the items an
// offset and a limit select, within the list, and page numbers that count from 1.
func checkPage(t *testing.T, total, limit, offset int) {
	t.Helper()
	p := pageOf(total, limit, offset)
	wantFrom, wantTo := min(offset, total), total
	if offset < total && total-offset > limit {
		wantTo = offset + limit
	}
	switch {
	case p.from != wantFrom || p.to != wantTo:
		t.Fatalf("pageOf(%d, %d, %d) selects [%d, %d), want [%d, %d)", total, limit, offset, p.from, p.to, wantFrom, wantTo)
	case p.totalPages < 0 || p.totalPages*limit < total || (total > 0 && (p.totalPages-1)*limit >= total) ||
		(total == 0) != (p.totalPages == 0):
		t.Fatalf("pageOf(%d, %d, %d): %d pages", total, limit, offset, p.totalPages)
	case p.number < 1 || (offset < math.MaxInt && p.number != offset/limit+1):
		t.Fatalf("pageOf(%d, %d, %d): page number %d", total, limit, offset, p.number)
	}
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
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, raw string) {
		_, perr := validation.ParseUUID(raw)
		type route struct {
			name  string
			param string
			h     handler
			body  string // a valid body, for a handler that reads one
		}
		for _, rt := range []route{
			{"delete site", "site_id", s.deleteSite, ""},
			{"eligibility", "site_id", s.eligibility, ""},
			{"get site", "site_id", s.getSite, ""},
			{"offboard", "site_id", s.offboard, ""},
			{"transactions", "site_id", s.transactions, ""},
			{"reward info", "site_id", s.rewardInfo, ""},
			{"get asset", "asset_id", s.getAsset, ""},
			{"update asset", "asset_id", s.updateAsset, "{}"},
			{"delete asset", "asset_id", s.deleteAsset, ""},
		} {
			r := httptest.NewRequest(http.MethodGet, "/", strings.NewReader(rt.body))
			r.SetPathValue(rt.param, raw)
			_, err := rt.h(r, fuzzPrincipal)
			got := checkAnswer(t, s, err, "path")
			if perr == nil {
				if !got.reached {
					t.Fatalf("%s: a well-formed id %q answers %v", rt.name, raw, got.ae)
				}
				continue
			}
			items, ok := got.ae.detail.([]ValidationItem)
			if got.reached || !ok || len(items) != 1 || !reflect.DeepEqual(items[0].Loc, []any{"path", rt.param}) ||
				items[0].Type != "uuid_parsing" {
				t.Fatalf("%s: malformed id %q answered %+v", rt.name, raw, got)
			}
		}
		// The body's site_id of POST /entities/asset is a path-like id too, at ["body", "site_id"].
		_, err := s.siteForID(context.Background(), fuzzPrincipal, raw, []any{"body", "site_id"})
		got := checkAnswer(t, s, err, "body")
		if (perr == nil) != got.reached {
			t.Fatalf("siteForID(%q): %+v, ParseUUID: %v", raw, got, perr)
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
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		r := jsonRequest(data)
		r.SetPathValue("site_id", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e")
		handlers := []handler{s.enrol, s.unenrol, s.meterConsent, s.createAsset, s.validateMPAN}
		which %= uint8(len(handlers))
		answer, herr := handlers[which](r, fuzzPrincipal)
		if which == 4 && herr == nil {
			// MPAN validation reads nothing: a 200 must be for a valid MPAN.
			body, _ := decodeJSON(jsonRequest(data))
			mpan, _ := body["mpan"].(string)
			if _, err := validation.NormaliseMPAN(mpan); err != nil || !reflect.DeepEqual(answer, map[string]bool{"isValid": true}) {
				t.Fatalf("MPAN %q answered %v", mpan, answer)
			}
			return
		}
		got := checkAnswer(t, s, herr, "body")
		if !got.reached {
			return
		}
		// It reached the store: what it read must be valid and storable.
		body, err := decodeJSON(jsonRequest(data))
		if err != nil {
			t.Fatalf("reached the store with a body decodeJSON refuses: %v", err)
		}
		fl := &fields{}
		switch which {
		case 0, 1:
			if p, _ := body["proposition"].(string); !slices.Contains(flexv1.AllPropositions, flexv1.PropositionName(p)) {
				t.Fatalf("proposition %#v accepted", body["proposition"])
			}
			if consent := fl.consent(body, []any{"body"}, false); which == 0 && consent != nil {
				checkStorableTime(t, "body.gave_boundary_meter_consent_at", *consent)
			}
			if which == 1 {
				fl.items = nil // unenrol reads the proposition only
			}
		case 2:
			consent := fl.consent(body, []any{"body"}, true)
			if consent == nil {
				t.Fatalf("meter consent without a consent timestamp accepted: %v", fl.items)
			}
			checkStorableTime(t, "body.gave_boundary_meter_consent_at", *consent)
		case 3:
			checkStorableAsset(t, parseAsset(fl, body, []any{"body"}, fuzzNow), "body")
			if id, _ := body["site_id"].(string); !validation.IsUUID(id) {
				t.Fatalf("site_id %q reached the store", id)
			}
		}
		if err := fl.err(); err != nil {
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
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, data []byte) {
		_, herr := s.checkEligibility(jsonRequest(data), fuzzPrincipal)
		got := checkAnswer(t, s, herr, "body")
		body, err := decodeJSON(jsonRequest(data))
		if err != nil {
			checkAnswer(t, s, err, "body")
			sameAnswer(t, got, err)
			return
		}
		fl := &fields{}
		rawMPAN, mpanOK := fl.str(body, []any{"body"}, "mpan", true)
		var mpan string
		if mpanOK {
			norm, err := validation.NormaliseMPAN(rawMPAN)
			if err != nil {
				fl.addValidation(err, []any{"body", "mpan"})
			}
			mpan = norm
		}
		model, _ := fl.str(body, []any{"body"}, "asset_model", false)
		if err := fl.err(); err != nil {
			checkAnswer(t, s, err, "body")
			sameAnswer(t, got, err)
			return
		}
		sameAnswer(t, got, nil)
		if !mpanPattern.MatchString(mpan) || validation.MPANCheckDigit(mpan[:12]) != int(mpan[12]-'0') {
			t.Fatalf("mpan %q accepted as %q", rawMPAN, mpan)
		}
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
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, deconsent bool, data []byte) {
		handler, change := s.dispatchConsent, household.ConsentDispatch
		if deconsent {
			handler, change = s.dispatchDeconsent, household.DeconsentDispatch
		}
		r := jsonRequest(data)
		r.SetPathValue("site_id", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e")
		_, herr := handler(r, fuzzPrincipal)
		got := checkAnswer(t, s, herr, "body")
		body, err := decodeJSON(jsonRequest(data))
		if err != nil {
			checkAnswer(t, s, err, "body")
			sameAnswer(t, got, err)
			return
		}
		fl := &fields{}
		methods := dispatchMethods(fl, body, []any{"body"})
		if err := fl.err(); err != nil {
			checkAnswer(t, s, err, "body")
			sameAnswer(t, got, err)
			checkDispatchItems(t, body, fl.items)
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
func checkDispatchItems(t *testing.T, body map[string]any, items []ValidationItem) {
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
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, rawID string, data []byte) {
		request := func() *http.Request {
			r := jsonRequest(data)
			r.SetPathValue("asset_id", rawID)
			return r
		}
		_, herr := s.updateAsset(request(), fuzzPrincipal)
		got := checkAnswer(t, s, herr, "path", "body")

		fl := &fields{}
		fl.uuidParam(request(), "asset_id")
		body, err := decodeJSON(jsonRequest(data))
		if err != nil {
			want := fl.join(err)
			checkAnswer(t, s, want, "path", "body")
			sameAnswer(t, got, want)
			return
		}
		in := parseAssetFields(fl, body, []any{"body"}, fuzzNow)
		want := fl.err()
		if want != nil {
			checkAnswer(t, s, want, "path", "body")
		}
		sameAnswer(t, got, want)
		if want != nil {
			return
		}
		// Accepted: storable, and a repeat changes nothing.
		if !validation.IsUUID(rawID) {
			t.Fatalf("asset_id %q reached the store", rawID)
		}
		checkStorableAsset(t, assetInput{ExternalID: "e1", Type: flexv1.AssetTypeBattery, AssetFields: in}, "body")
		asset := household.NewAsset("org-fuzz", "site", "e1", flexv1.AssetTypeBattery)
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
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, data []byte) {
		r := jsonRequest(data)
		r.SetPathValue("site_id", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e")
		_, herr := s.patchSite(r, fuzzPrincipal)
		if !checkAnswer(t, s, herr, "body").reached {
			return
		}
		body, err := decodeJSON(jsonRequest(data))
		if err != nil {
			t.Fatalf("reached the store with a body decodeJSON refuses: %v", err)
		}
		fl := &fields{}
		in := parseSiteUpdate(fl, body)
		if err := fl.err(); err != nil {
			t.Fatalf("reached the store with a body its field readers refuse: %v", err)
		}
		if in.mpan != "" && (!mpanPattern.MatchString(in.mpan) || validation.MPANCheckDigit(in.mpan[:12]) != int(in.mpan[12]-'0')) {
			t.Fatalf("mpan %q accepted", in.mpan)
		}
		if pc := in.fields.Postcode; pc != nil && !postcodePattern.MatchString(*pc) {
			t.Fatalf("postcode %q accepted outside the CRD pattern", *pc)
		}
		if a := in.fields.StreetAddress; a != nil {
			maxRunes(t, "body.address", *a, 512)
		}
		if e := in.fields.Email; e != nil {
			maxRunes(t, "body.email", *e, 254)
			if err := validation.ValidateEmail(*e); err != nil {
				t.Fatalf("email %q accepted: %v", *e, err)
			}
		}
		if tr := in.fields.Tariff; tr != nil {
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

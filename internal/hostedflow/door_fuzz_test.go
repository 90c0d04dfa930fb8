package hostedflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/meterpoints"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/sealing"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
	"github.com/flexsite/flexsite/internal/web/webtest"
)

// fuzzEndUser is the end user the hosted flow's handlers act for.
var fuzzEndUser = &auth.Principal{Kind: auth.KindEndUser, Namespace: "org-fuzz", ClientName: "fuzz", Username: "fuzz",
	SiteName: "site-fuzz", UserID: "6f1c2d4e-8a7b-4c3d-9e0f-1a2b3c4d5e6f", AllowedOrigin: "https://app.example.com"}

// fuzzNow is the fuzz door's clock: installation dates judge alike in every run.
var fuzzNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// The steps FuzzHostedBodies picks from (its first input, modulo their number).
const (
	stepAddress = iota
	stepConsent
	stepAddAsset
	stepEnrol
	stepUnenrol
	stepDeleteAsset
	steps
)

// FuzzHostedBodies fuzzes the bodies of the hosted flow's JSON routes (which picks the route:
// address, consent, add asset, enrol, unenrol, remove asset with data as its path id), through
// the door's handlers on a store every read fails (webtest.UnreachableStore). The invariants:
// no panic; every error a well-formed 4xx, never a 500, its 422 items at ["body", <a field the
// step reads>] or ["path", "asset_id"]; the handler answers exactly the 422 the field readers
// predict and reaches the store only when they predict none; what reaches the store is valid
// (a normalised postcode and MPAN, a finite power_kw within bounds, ...); and a power_kw the
// form sends as text that reads as a non-finite number is refused at ["body", "power_kw"].
func FuzzHostedBodies(f *testing.F) {
	for _, seed := range []struct {
		which uint8
		body  string
	}{
		{stepAddress, `{"postcode":"SW1A 1AA","street_address":"10 Downing Street","mpan":"1200000000011"}`},
		{stepAddress, `{"postcode":"sw1a1aa","mpan":" 12 0000 0000 011 "}`},
		{stepAddress, `{"postcode":"","mpan":"1200000000011"}`},
		{stepAddress, `{"postcode":"SW1A 1AA","mpan":12}`},
		{stepAddress, `{"postcode":"SW1A 1AA","mpan":"1200000000011","street_address":["x"]}`},
		{stepAddress, `{"postcode":"SW1A 1AA","mpan":"1200000000011","street_address":"` + strings.Repeat("a", 513) + `"}`},
		{stepAddress, `{"postcode":"SW1A 1AA","mpan":"1234567890123","address":"not read here"}`},
		{stepAddress, `[]`},
		{stepAddress, `{"postcode":"SW1A 1AA","meter_ref":"AQAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`},
		{stepAddress, `{"postcode":"SW1A 1AA","meter_ref":"not a reference","mpan":"1200000000011"}`},
		{stepAddress, `{"postcode":"SW1A 1AA","meter_ref":7,"mpan":"1200000000011"}`},
		{stepAddress, `{"postcode":"SW1A 1AA","mpan":" "}`},
		{stepConsent, `{"gave_boundary_meter_consent":true}`},
		{stepConsent, `{"gave_boundary_meter_consent":"yes"}`},
		{stepConsent, `{}`},
		{stepAddAsset, `{"type":"charger","asset_model":"zappi","installation_date":"2025-06-15","power_kw":"7.4"}`},
		{stepAddAsset, `{"type":"battery","power_kw":5}`},
		{stepAddAsset, `{"type":"charger","power_kw":" "}`},
		{stepAddAsset, `{"type":"charger","power_kw":"seven"}`},
		{stepAddAsset, `{"type":"charger","power_kw":"NaN"}`},
		{stepAddAsset, `{"type":"charger","power_kw":"Inf"}`},
		{stepAddAsset, `{"type":"charger","power_kw":"-Infinity"}`},
		{stepAddAsset, `{"type":"charger","power_kw":"1e309"}`},
		{stepAddAsset, `{"type":"charger","power_kw":1e309}`},
		{stepAddAsset, `{"type":"charger","power_kw":"-0.5"}`},
		{stepAddAsset, `{"type":"charger","installation_date":"2026-03-02"}`},
		{stepAddAsset, `{"type":null,"power_kw":{"a":1}}`},
		{stepEnrol, `{"proposition":"limited_pause"}`},
		{stepEnrol, `{"proposition":7}`},
		{stepUnenrol, `{"proposition":"price_curve"}`},
		{stepDeleteAsset, `8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e`},
		{stepDeleteAsset, `../site`},
	} {
		f.Add(seed.which, []byte(seed.body))
	}
	store := webtest.UnreachableStore{}
	d := &Door{Log: logr.Discard(), Now: func() time.Time { return fuzzNow },
		Households: app.New(app.Config{Log: logr.Discard(), Cache: store, APIReader: store, Now: func() time.Time { return fuzzNow }}),
		Meters: &meterpoints.Service{Log: logr.Discard(), Now: func() time.Time { return fuzzNow },
			Keys: sealing.NewKeyRing(store, nil, "flexsite-system", meterpoints.DefaultKeysSecret, "meter references")}}
	handlers := [steps]web.Handler{d.address, d.consent, d.addAsset, d.enrolment(true), d.enrolment(false), d.deleteAsset}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		which %= steps
		r := webtest.JSONRequest(data)
		if which == stepDeleteAsset {
			r.SetPathValue("asset_id", string(data))
		}
		_, err := handlers[which](r, fuzzEndUser)
		got := webtest.CheckAnswer(t, err, "body", "path")

		if which == stepDeleteAsset {
			_, perr := validation.ParseUUID(string(data))
			items := got.Items()
			if (perr == nil) != got.Reached || (!got.Reached && (len(items) != 1 ||
				!reflect.DeepEqual(items[0].Loc, []any{"path", "asset_id"}) || items[0].Type != "uuid_parsing")) {
				t.Fatalf("asset id %q answered %+v (ParseUUID: %v)", data, got, perr)
			}
			return
		}
		body, derr := web.DecodeJSON(webtest.JSONRequest(data))
		if derr != nil {
			webtest.SameAnswer(t, got, derr)
			return
		}
		read, want := expectedAnswer(t, which, body, got)
		webtest.SameAnswer(t, got, want)
		for _, it := range got.Items() {
			if len(it.Loc) < 2 || !slices.Contains(read, fmt.Sprint(it.Loc[1])) {
				t.Fatalf("item %+v names a field the step does not read (%v)", it, read)
			}
		}
	})
}

// expectedAnswer is what step which must answer for body, as the field readers read it (and
// the fields it reads); what reached the store (got) must be what a store may hold.
func expectedAnswer(t *testing.T, which uint8, body map[string]any, got webtest.Outcome) ([]string, error) {
	t.Helper()
	fl := &web.Fields{}
	loc := []any{"body"}
	var read []string // the fields the step reads
	switch which {
	case stepAddress:
		read = []string{"postcode", "mpan", "meter_ref", "street_address"}
		if pc, ok := fl.Str(body, loc, "postcode", true); ok {
			if norm, err := validation.NormalisePostcode(pc); err != nil {
				fl.AddValidation(err, web.At(loc, "postcode"))
			} else if got.Reached && !postcodePattern.MatchString(norm) {
				t.Fatalf("postcode %q reached the store as %q", pc, norm)
			}
		}
		if ref, ok := fl.Str(body, loc, "meter_ref", false); ok && ref != "" {
			// No reference opens here: the fuzz door's key Secret cannot be read.
			fl.Add(MeterRefWords, "value_error", web.At(loc, "meter_ref"))
		} else if mpan, ok := fl.Str(body, loc, "mpan", false); ok && strings.TrimSpace(mpan) != "" {
			// A blank or missing MPAN is judged with the site (required only when it has none).
			if norm, err := validation.NormaliseMPAN(mpan); err != nil {
				fl.AddValidation(err, web.At(loc, "mpan"))
			} else if got.Reached && (len(norm) != 13 || validation.MPANCheckDigit(norm[:12]) != int(norm[12]-'0')) {
				t.Fatalf("mpan %q reached the store as %q", mpan, norm)
			}
		}
		if street, ok := fl.Str(body, loc, "street_address", false); ok && utf8.RuneCountInString(street) > 512 {
			t.Fatalf("a street address of %d characters read", utf8.RuneCountInString(street))
		}
	case stepConsent:
		read = []string{"gave_boundary_meter_consent"}
		fl.Boolean(body, loc, "gave_boundary_meter_consent")
	case stepAddAsset:
		read = []string{"type", "asset_model", "installation_date", "power_kw"}
		web.Enum(fl, body, loc, "type", true, flexv1.CreatableAssetTypes)
		fl.Str(body, loc, "asset_model", false)
		if date, ok := fl.Str(body, loc, "installation_date", false); ok && date != "" {
			if err := validation.ValidateInstallationDate(date, fuzzNow); err != nil {
				fl.AddValidation(err, web.At(loc, "installation_date"))
			}
		}
		checkPower(t, fl, body, got)
	case stepEnrol, stepUnenrol:
		read = []string{"proposition"}
		web.Enum(fl, body, loc, "proposition", true, flexv1.AllPropositions)
	}
	return read, fl.Err()
}

// postcodePattern is the CRD's pattern for spec.postcode.
var postcodePattern = regexp.MustCompile(`^([A-Z]{1,2}[0-9][A-Z0-9]? [0-9][A-Z]{2}|GIR 0AA)$`)

// checkPower reads power_kw as the assets step documents it: a number, or text that reads as
// a decimal number (validation.ParseNumber; blank text is no value). Text that is no decimal
// number ("NaN", "Inf", "0x1p3", "7,4") is refused as not a number, and a decimal too large
// for a float64 as not finite, both at ["body", "power_kw"], as the REST API refuses them.
// What reaches the store is finite and within bounds.
func checkPower(t *testing.T, fl *web.Fields, body map[string]any, got webtest.Outcome) {
	t.Helper()
	v := body["power_kw"]
	if text, isText := v.(string); isText {
		_, err := validation.ParseNumber(text)
		var ve *validation.Error
		switch text = strings.TrimSpace(text); {
		case text == "":
			v = nil
		case err == nil || (errors.As(err, &ve) && ve.Type == "finite_number"):
			v = json.Number(text)
		}
		if err != nil && text != "" {
			want := "float_type"
			if errors.As(err, &ve) {
				want = ve.Type
			}
			at := slices.IndexFunc(got.Items(), func(it app.FieldError) bool {
				return reflect.DeepEqual(it.Loc, []any{"body", "power_kw"}) && it.Type == want
			})
			if got.Reached || at < 0 {
				t.Fatalf("power_kw %q answered %+v, want a 422 %s at [body power_kw]", text, got, want)
			}
		}
	}
	power := fl.NonNegative(map[string]any{"power_kw": v}, []any{"body"}, "power_kw")
	if got.Reached && power != nil && (math.IsNaN(*power) || math.IsInf(*power, 0) || *power < 0) {
		t.Fatalf("power_kw %v reached the store", *power)
	}
}

package facade

import (
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/auth"
)

// fuzzEndUser is the end user the hosted flow's handlers act for.
var fuzzEndUser = &auth.Principal{Kind: auth.KindEndUser, Namespace: "org-fuzz", ClientName: "fuzz", Username: "fuzz",
	SiteName: "site-fuzz", UserID: "6f1c2d4e-8a7b-4c3d-9e0f-1a2b3c4d5e6f", AllowedOrigin: "https://app.example.com"}

// FuzzHostedBodies fuzzes the bodies of the hosted flow's JSON routes (which picks the route:
// address, consent, add asset, enrol, unenrol, remove asset with data as its path id). The
// invariants of this file hold: no panic, a 4xx *apiError or the store reached; and the
// address step reaches the store only with both of its required fields.
func FuzzHostedBodies(f *testing.F) {
	for _, seed := range []struct {
		which uint8
		body  string
	}{
		{0, `{"postcode":"SW1A 1AA","street_address":"10 Downing Street","mpan":"1200000000011"}`},
		{0, `{"postcode":"","mpan":"1200000000011"}`},
		{0, `{"postcode":"SW1A 1AA","mpan":12}`},
		{0, `{"postcode":"SW1A 1AA","mpan":"1200000000011","street_address":["x"]}`},
		{0, `[]`},
		{1, `{"gave_boundary_meter_consent":true}`},
		{1, `{"gave_boundary_meter_consent":"yes"}`},
		{2, `{"type":"charger","asset_model":"zappi","installation_date":"2025-06-15","power_kw":"7.4"}`},
		{2, `{"type":"charger","power_kw":"seven"}`},
		{2, `{"type":null,"power_kw":{"a":1}}`},
		{3, `{"proposition":"limited_pause"}`},
		{3, `{"proposition":7}`},
		{4, `{"proposition":"price_curve"}`},
		{5, `8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e`},
		{5, `../site`},
	} {
		f.Add(seed.which, []byte(seed.body))
	}
	s := fuzzServer()
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		r := jsonRequest(data)
		handlers := []handler{s.hostedAddress, s.hostedConsent, s.hostedAddAsset, s.hostedEnrolment(s.enrol, true),
			s.hostedEnrolment(s.unenrol, false), s.hostedDeleteAsset}
		which %= uint8(len(handlers))
		if which == 5 {
			r.SetPathValue("asset_id", string(data))
		}
		_, err := handlers[which](r, fuzzEndUser)
		got := checkAnswer(t, s, err, "body", "path")
		if !got.reached || which != 0 {
			return
		}
		body, err := decodeJSON(jsonRequest(data))
		if err != nil {
			t.Fatalf("reached the store with a body decodeJSON refuses: %v", err)
		}
		for _, key := range []string{"postcode", "mpan"} {
			if v, ok := body[key].(string); !ok || strings.TrimSpace(v) == "" {
				t.Fatalf("the address step reached the store without %s: %s", key, data)
			}
		}
	})
}

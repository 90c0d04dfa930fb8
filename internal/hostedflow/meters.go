package hostedflow

import (
	"net/http"
	"strings"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
)

// "Find my meter" (docs/hosted-flow.md, "Find my meter"): few households know their 13-digit
// MPAN, so the address step searches the meter-point register by postcode (and, optionally, a
// house number or name) and the household picks its address. Each address comes with the
// search's sealed reference, sealed for the token's organisation (the end user's namespace),
// and the address step takes that reference instead of an MPAN: the full MPAN never reaches
// the page, which shows it masked (meters.MPANFor).

// MeterSearch answers GET /hosted/api/meters.
type MeterSearch struct {
	// Postcode is the searched postcode, normalised.
	Postcode string `json:"postcode"`
	// Status says what was found, in words (MetersFound): the page announces it.
	Status    string         `json:"status"`
	Addresses []MeterAddress `json:"addresses"`
}

// MeterAddress is one address a search found: the reference the address step takes, the
// address in one line, and its street address (the address lines) to fill the step's field.
type MeterAddress struct {
	Ref           string `json:"ref"`
	Address       string `json:"address"`
	StreetAddress string `json:"street_address"`
}

// meterSearch reads the query (postcode, building_identifier) and asks the register. A search
// is a read of the register, so the page sends one when the household presses "Find my
// meter", never per keystroke. A postcode or identifier the search cannot take is a field
// error at ["query", name] in the household's words.
func (d *Door) meterSearch(r *http.Request, p *auth.Principal) (any, error) {
	q := r.URL.Query()
	loc := []any{"query"}
	f := &web.Fields{}
	postcode, err := validation.NormalisePostcode(q.Get("postcode"))
	if err != nil {
		f.Add(MeterPostcodeWords, "value_error", web.At(loc, "postcode"))
	}
	building := q.Get("building_identifier")
	if len(building) > meters.MaxBuildingBytes || validation.SingleLineText(building) != nil {
		f.Add(MeterBuildingWords, "value_error", web.At(loc, "building_identifier"))
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	found, err := d.Meters.Search(r.Context(), p, postcode, building)
	if e := app.As(err); e != nil && (e.Kind == app.Unavailable || e.Kind == app.TooManyRequests) {
		plain := *e // still 503 or 429 with its Retry-After, said for a household
		plain.Detail = MeterUnavailableWords
		if e.Kind == app.TooManyRequests {
			plain.Detail = MeterBudgetWords
		}
		return nil, &plain
	}
	if err != nil {
		return nil, err
	}
	out := MeterSearch{Postcode: postcode, Addresses: make([]MeterAddress, 0, len(found)),
		Status: MetersFound(len(found), postcode, len(found) == meters.MaxSearchResults)}
	for _, m := range found {
		out.Addresses = append(out.Addresses, MeterAddress{Ref: m.Ref, Address: m.Address, StreetAddress: m.Street})
	}
	return out, nil
}

// readMeter reads the address step's meter: the reference of a picked address (meter_ref),
// opened for the token's organisation, or else a typed MPAN; "" when neither is sent (or the
// MPAN is blank), which keeps the site's MPAN: the page never has a found MPAN to send back.
// A site without an MPAN needs one (errMeterRequired). A picked address must be at postcode,
// the step's postcode (nil when it is not a valid one: that field's problem is told already):
// a reference carries the postcode that was searched, so a household cannot save one
// postcode with a meter found at another.
func (d *Door) readMeter(r *http.Request, p *auth.Principal, f *web.Fields, body map[string]any, postcode *string) string {
	loc := []any{"body"}
	if ref, ok := f.Str(body, loc, "meter_ref", false); ok && ref != "" {
		opened, err := d.Meters.Open(r.Context(), p, ref)
		if err != nil {
			// Every reason a reference does not open is one answer (meterpoints.ErrMeterNotFound).
			f.Add(MeterRefWords, "value_error", web.At(loc, "meter_ref"))
			return ""
		}
		if postcode != nil && !opened.SamePostcode(*postcode) {
			f.Add(MeterElsewhereWords, "value_error", web.At(loc, "meter_ref"))
			return ""
		}
		return opened.MPAN
	}
	mpan, ok := f.Str(body, loc, "mpan", false)
	if !ok || strings.TrimSpace(mpan) == "" {
		return ""
	}
	norm, err := validation.NormaliseMPAN(mpan)
	if err != nil {
		f.AddValidation(err, web.At(loc, "mpan"))
		return ""
	}
	return norm
}

// errMeterRequired answers an address step that sends no meter for a site that has none: the
// field readers' own "Field required".
var errMeterRequired = app.InvalidFields(app.Field("Field required", "missing", "body", "mpan"))

// householdSite is the household's own view of its site: its MPAN as the token may see it
// (meters.MPANFor: masked but for the last four digits), as every answer of the flow shows it.
func householdSite(p *auth.Principal, postcode, street, mpan string, consentAt *string) Site {
	return Site{Postcode: postcode, StreetAddress: street, MPANMasked: meters.MPANFor(p.MPANViewer(), mpan),
		GaveBoundaryMeterConsentAt: consentAt}
}

// siteAnswer is the address step's answer: the stored site, as the household sees it (the use
// case's record already holds the MPAN as the token may see it).
func siteAnswer(rec app.LegacySiteRecord) Site {
	return Site{Postcode: rec.Postcode, StreetAddress: rec.Address, MPANMasked: rec.MPAN,
		GaveBoundaryMeterConsentAt: rec.BoundaryMeterConsentAt}
}

package hostedflow

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/devices"
	"github.com/flexsite/flexsite/internal/app/flexevents"
	"github.com/flexsite/flexsite/internal/app/meterpoints"
	"github.com/flexsite/flexsite/internal/app/pricing"
	"github.com/flexsite/flexsite/internal/app/rewards"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/units"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
	"github.com/flexsite/flexsite/internal/web/batterychart"
	"github.com/flexsite/flexsite/internal/web/flexchart"
)

// The hosted flow's door (docs/hosted-flow.md, "Embedding the hosted flow"): GET /hosted/flow
// serves the embeddable page, and the routes under /hosted/api are the page's own JSON routes. They
// take only an end-user (component) token, and only when the page reports, in EmbedderOriginHeader,
// that the token came from a message of the token's allowed_origin. Each reads the page's form into
// the typed input of the use case that does the same thing for the REST API (internal/app), for the
// token's own site: the flow answers as the REST API does, through the same use cases, and
// re-implements no rule.

// EmbedderOriginHeader carries, on every /hosted/api call, the origin the browser reported
// for the message that handed the page its token (MessageEvent.origin).
const EmbedderOriginHeader = "Flexsite-Embedder-Origin"

// Door serves the hosted flow.
type Door struct {
	Log        logr.Logger
	Households *app.Service
	Rewards    *rewards.Service
	// Devices are the device-connection use cases (the Connect step).
	Devices *devices.Service
	// FlexEvents finds the household's settled flex events and what its devices did in them, for
	// the rewards step (nil: none).
	FlexEvents *flexevents.Service
	// Pricing tells the household its next charging window and its battery's plan (nil: none
	// are shown).
	Pricing *pricing.Service
	// Meters finds the household's meter point from its postcode ("Find my meter").
	Meters *meterpoints.Service
	Guard  *web.Authenticator
	// PublicURL is the scheme and host of Flexsite (empty: the request's).
	PublicURL string
	// Now is the clock (tests replace it): consent times and installation dates are judged by it.
	Now func() time.Time
}

// Routes are the flow's page, its files and its JSON routes.
func (d *Door) Routes() []web.Route {
	api := d.api
	return []web.Route{
		{Method: http.MethodGet, Path: "/hosted/flow", Handler: http.HandlerFunc(d.page)},
		{Method: http.MethodGet, Path: "/hosted/flow.js", Handler: file("flow.js")},
		{Method: http.MethodGet, Path: "/hosted/flow.css", Handler: file("flow.css")},
		{Method: http.MethodGet, Path: "/hosted/api/household", Handler: api(d.household)},
		{Method: http.MethodPut, Path: "/hosted/api/address", Handler: api(d.address)},
		{Method: http.MethodGet, Path: "/hosted/api/meters", Handler: api(d.meterSearch)},
		{Method: http.MethodPut, Path: "/hosted/api/consent", Handler: api(d.consent)},
		{Method: http.MethodPost, Path: "/hosted/api/assets", Handler: api(d.addAsset)},
		{Method: http.MethodDelete, Path: "/hosted/api/assets/{asset_id}", Handler: api(d.deleteAsset)},
		{Method: http.MethodGet, Path: "/hosted/api/eligibility", Handler: api(d.eligibility)},
		{Method: http.MethodPost, Path: "/hosted/api/enrol", Handler: api(d.enrolment(true))},
		{Method: http.MethodPost, Path: "/hosted/api/unenrol", Handler: api(d.enrolment(false))},
		{Method: http.MethodGet, Path: "/hosted/api/rewards", Handler: api(d.rewards)},
		{Method: http.MethodGet, Path: "/hosted/api/connections", Handler: api(d.connections)},
		{Method: http.MethodPost, Path: "/hosted/api/connections/{provider}", Handler: api(d.connect)},
	}
}

func (d *Door) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Door) page(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, err := Render(ThemeFrom(q.Get("primary"), q.Get("background")))
	if err != nil {
		web.WriteError(d.Log, w, r, err)
		return
	}
	web.PageHeaders(w, web.Page{CSP: page.CSP, Embeddable: true})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(page.HTML)))
	_, _ = w.Write(page.HTML)
}

func file(name string) http.Handler {
	a := Assets[name]
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		web.PageHeaders(w, web.Page{Embeddable: true})
		w.Header().Set("Content-Type", a.ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(a.Body)))
		_, _ = w.Write(a.Body)
	})
}

var (
	errNeedsComponentToken = web.Fail(http.StatusForbidden, "The hosted flow's routes need a component (end-user) token")
	errWrongOrigin         = web.Fail(http.StatusForbidden, "This token was not handed over by its allowed origin")
)

// apiPage is the headers' part of the /hosted/api routes: JSON, never framed.
var apiPage = web.Page{CSP: "default-src 'none'; frame-ancestors 'none'"}

// api authenticates a /hosted/api route: an end-user token whose allowed_origin is the origin
// the page reports for the message that brought it.
func (d *Door) api(h web.Handler) http.Handler {
	inner := d.Guard.Guard(func(r *http.Request, p *auth.Principal) (any, error) {
		if p.Kind != auth.KindEndUser {
			return nil, errNeedsComponentToken
		}
		if o := r.Header.Get(EmbedderOriginHeader); o == "" || o != p.AllowedOrigin {
			return nil, errWrongOrigin
		}
		return h(r, p)
	}, true)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		web.PageHeaders(w, apiPage)
		inner.ServeHTTP(w, r)
	})
}

// Household answers GET /hosted/api/household: what the flow shows, and where it starts.
type Household struct {
	SiteID               string                   `json:"site_id"`
	AllowedOrigin        string                   `json:"allowed_origin"`
	StartStep            string                   `json:"start_step"`
	Site                 Site                     `json:"site"`
	Assets               []HouseholdAsset         `json:"assets"`
	EnrolledPropositions []flexv1.PropositionName `json:"enrolled_propositions"`
	Catalogue            Catalogue                `json:"catalogue"`
}

// Site is the household's stored address and consent. The MPAN is shown masked but for its
// last four digits (meters.MaskedMPAN; "" when none): an MPAN found from a picked address is
// never shown in full to the page, so no answer of the flow shows one.
type Site struct {
	Postcode                   string  `json:"postcode"`
	StreetAddress              string  `json:"street_address"`
	MPANMasked                 string  `json:"mpan_masked"`
	GaveBoundaryMeterConsentAt *string `json:"gave_boundary_meter_consent_at"`
}

// HouseholdAsset is one of the household's assets as the flow lists it.
type HouseholdAsset struct {
	ID               string           `json:"id"`
	Type             flexv1.AssetType `json:"type"`
	AssetModel       string           `json:"asset_model"`
	InstallationDate string           `json:"installation_date"`
	PowerKW          *float64         `json:"power_kw"`
	Description      string           `json:"description"`
}

// Catalogue is what the assets step offers: the creatable types, and the models.
type Catalogue struct {
	AssetTypes  []Choice `json:"asset_types"`
	AssetModels []Model  `json:"asset_models"`
}

// Choice is a value and the words a household reads for it.
type Choice struct {
	Value       string `json:"value"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// Model is one model of the asset-model catalogue.
type Model struct {
	Model      string             `json:"model"`
	Label      string             `json:"label"`
	AssetTypes []flexv1.AssetType `json:"asset_types"`
}

func (d *Door) household(r *http.Request, p *auth.Principal) (any, error) {
	h, err := d.Households.Household(r.Context(), p)
	if err != nil {
		return nil, err
	}
	site := h.Site
	out := Household{
		SiteID: site.Labels[flexv1.IDLabel], AllowedOrigin: p.AllowedOrigin,
		Site: householdSite(p, site.Spec.Postcode, site.Spec.StreetAddress, site.Spec.MPAN,
			app.FormatTime(site.Spec.BoundaryMeterConsentAt)),
		Assets:               make([]HouseholdAsset, 0, len(h.Assets)),
		EnrolledPropositions: h.Enrolled,
	}
	for i := range h.Assets {
		out.Assets = append(out.Assets, householdAsset(&h.Assets[i]))
	}
	for _, t := range flexv1.CreatableAssetTypes {
		out.Catalogue.AssetTypes = append(out.Catalogue.AssetTypes, Choice{Value: string(t), Label: AssetTypeName(string(t))})
	}
	out.Catalogue.AssetModels = make([]Model, 0, len(h.Models))
	for _, m := range h.Models {
		label := strings.TrimSpace(m.Spec.Manufacturer + " " + m.Spec.ModelName)
		types := m.Spec.AssetTypes
		if types == nil {
			types = []flexv1.AssetType{}
		}
		out.Catalogue.AssetModels = append(out.Catalogue.AssetModels, Model{Model: m.Spec.ModelName, Label: label, AssetTypes: types})
	}
	slices.SortFunc(out.Catalogue.AssetModels, func(a, b Model) int { return cmp.Compare(a.Label, b.Label) })
	lapsed, unconnected := false, false
	if d.Devices != nil {
		providers, _, err := d.Devices.HouseholdProviders(r.Context(), p)
		if err != nil {
			return nil, err
		}
		for _, pr := range providers {
			lapsed = lapsed || pr.Status == "needs_reauthorisation" || pr.Status == "revoked"
			unconnected = unconnected || pr.Status == "not_connected" || pr.Status == "pending"
		}
	}
	out.StartStep = StartStep(Progress{
		HasAddress: site.Spec.MPAN != "" && site.Spec.Postcode != "", HasConsent: site.Spec.BoundaryMeterConsentAt != nil,
		Assets: len(out.Assets), Enrolments: len(out.EnrolledPropositions), Lapsed: lapsed,
		Unconnected: unconnected})
	return out, nil
}

func householdAsset(a *flexv1.Asset) HouseholdAsset {
	out := HouseholdAsset{ID: a.Labels[flexv1.IDLabel], Type: a.Spec.Type, AssetModel: a.Spec.Model,
		InstallationDate: a.Spec.InstallationDate, PowerKW: units.ToKilo(a.Spec.PowerW)}
	parts := []string{AssetTypeName(string(a.Spec.Type))}
	if a.Spec.Model != "" {
		parts = append(parts, a.Spec.Model)
	}
	if out.PowerKW != nil {
		parts = append(parts, strconv.FormatFloat(*out.PowerKW, 'f', -1, 64)+" kW")
	}
	if a.Spec.InstallationDate != "" {
		parts = append(parts, "installed "+a.Spec.InstallationDate)
	}
	out.Description = strings.Join(parts, ", ")
	return out
}

// ownSiteID is the API id of the end user's own site.
func (d *Door) ownSiteID(r *http.Request, p *auth.Principal) (string, error) {
	site, err := d.Households.OwnSite(r.Context(), p)
	if err != nil {
		return "", err
	}
	return site.Labels[flexv1.IDLabel], nil
}

// readBody reads the page's JSON body: every problem comes back as one 422 (the REST API's
// form, which the page shows beside each field).
var readBody = web.ReadBody

// address is the address step: the postcode and the meter (both required: the step is
// complete with both) and the street address change as a site's PATCH changes them. The meter
// is a picked address's reference (meter_ref, "Find my meter") or a typed MPAN; a site that has
// its MPAN may leave both out; a picked address must be at the step's postcode. The body is
// judged whole before the site is read. A new meter spends the household's budget of meter
// changes (household.MeterChangesPerDay; past it, 429 in words). The answer is the site as the
// household sees it (MPAN masked).
func (d *Door) address(r *http.Request, p *auth.Principal) (any, error) {
	var in app.SiteUpdate
	err := readBody(r, func(f *web.Fields, body map[string]any) {
		loc := []any{"body"}
		if postcode, ok := f.Str(body, loc, "postcode", true); ok {
			if norm, err := validation.NormalisePostcode(postcode); err != nil {
				f.AddValidation(err, web.At(loc, "postcode"))
			} else {
				in.Fields.Postcode = &norm
			}
		}
		in.MPAN = d.readMeter(r, p, f, body, in.Fields.Postcode)
		if street, ok := f.Str(body, loc, "street_address", false); ok {
			in.Fields.StreetAddress = &street
		}
	})
	if err != nil {
		return nil, err
	}
	site, err := d.Households.OwnSite(r.Context(), p)
	if err != nil {
		return nil, err
	}
	if in.MPAN == "" && site.Spec.MPAN == "" {
		return nil, errMeterRequired
	}
	rec, err := d.Households.PatchSite(r.Context(), p, site.Labels[flexv1.IDLabel], in)
	if e := app.As(err); e != nil && e.Code == household.MeterChangesCode {
		plain := *e // still 429 with its Retry-After, said for a household
		plain.Detail = MeterChangesWords
		return nil, &plain
	}
	if err != nil {
		return nil, err
	}
	return siteAnswer(rec), nil
}

// consent is the consent step: a ticked box records the consent now; a consent already
// recorded keeps its time.
func (d *Door) consent(r *http.Request, p *auth.Principal) (any, error) {
	var consents bool
	if err := readBody(r, func(f *web.Fields, body map[string]any) {
		consents = f.Boolean(body, []any{"body"}, "gave_boundary_meter_consent")
	}); err != nil {
		return nil, err
	}
	site, err := d.Households.OwnSite(r.Context(), p)
	if err != nil {
		return nil, err
	}
	if !consents || site.Spec.BoundaryMeterConsentAt != nil {
		return map[string]any{"gave_boundary_meter_consent_at": app.FormatTime(site.Spec.BoundaryMeterConsentAt)}, nil
	}
	return d.Households.MeterConsent(r.Context(), p, site.Labels[flexv1.IDLabel], d.now().UTC().Truncate(time.Second))
}

// addAsset is the assets step: a new asset of the token's site, with an external id of the
// flow's own making.
func (d *Door) addAsset(r *http.Request, p *auth.Principal) (any, error) {
	in := app.AssetInput{ExternalID: "hosted-" + identity.NewID()}
	err := readBody(r, func(f *web.Fields, body map[string]any) {
		loc := []any{"body"}
		in.Type, _ = web.Enum(f, body, loc, "type", true, flexv1.CreatableAssetTypes)
		if m, ok := f.Str(body, loc, "asset_model", false); ok && m != "" {
			in.Model = &m
		}
		if date, ok := f.Str(body, loc, "installation_date", false); ok && date != "" {
			if err := validation.ValidateInstallationDate(date, d.now()); err != nil {
				f.AddValidation(err, web.At(loc, "installation_date"))
			} else {
				in.InstallationDate = &date
			}
		}
		// A number typed into the form arrives as text: read as a decimal number when it
		// reads as one (validation.ParseNumber: "NaN" or "Inf" do not), so that it is judged
		// as the REST API judges a JSON number (one beyond float64 is not finite); any other
		// text is refused as not a number.
		if text, isText := body["power_kw"].(string); isText {
			_, err := validation.ParseNumber(text)
			var ve *validation.Error
			switch text = strings.TrimSpace(text); {
			case text == "":
				delete(body, "power_kw")
			case err == nil || (errors.As(err, &ve) && ve.Type == "finite_number"):
				body["power_kw"] = json.Number(text)
			}
		}
		in.PowerKW = f.NonNegative(body, loc, "power_kw")
	})
	if err != nil {
		return nil, err
	}
	id, err := d.ownSiteID(r, p)
	if err != nil {
		return nil, err
	}
	return d.Households.CreateAsset(r.Context(), p, id, in)
}

// deleteAsset removes one of the household's own assets.
func (d *Door) deleteAsset(r *http.Request, p *auth.Principal) (any, error) {
	f := &web.Fields{}
	id := f.UUIDParam(r, "asset_id")
	if err := f.Err(); err != nil {
		return nil, err
	}
	if err := d.Households.DeleteAsset(r.Context(), p, id); err != nil {
		return nil, err
	}
	return web.NoContent{}, nil
}

// Eligibility answers GET /hosted/api/eligibility: the eligibility record of the REST API and
// the same in plain words.
type Eligibility struct {
	Record              *app.EligibilityRecord `json:"record"`
	Eligible            []Choice               `json:"eligible"`
	EnrolledNotEligible []Choice               `json:"enrolled_not_eligible"`
	Reasons             []Reason               `json:"reasons"`
}

// Reason says why one asset does not qualify for one proposition.
type Reason struct {
	Asset       string   `json:"asset"`
	Proposition string   `json:"proposition"`
	Sentences   []string `json:"sentences"`
}

func propositionChoice(p flexv1.PropositionName) Choice {
	return Choice{Value: string(p), Label: PropositionName(string(p)), Description: PropositionDescription(string(p))}
}

func (d *Door) eligibility(r *http.Request, p *auth.Principal) (any, error) {
	h, rec, err := d.Households.HouseholdEligibility(r.Context(), p)
	if err != nil {
		return nil, err
	}
	described := map[string]string{}
	for i := range h.Assets {
		described[h.Assets[i].Labels[flexv1.IDLabel]] = householdAsset(&h.Assets[i]).Description
	}
	res := Eligibility{Record: rec, Eligible: []Choice{}, EnrolledNotEligible: []Choice{}, Reasons: []Reason{}}
	for _, prop := range rec.EligiblePropositions {
		res.Eligible = append(res.Eligible, propositionChoice(prop))
	}
	for _, prop := range flexv1.AllPropositions {
		if slices.Contains(h.Enrolled, prop) && !slices.Contains(rec.EligiblePropositions, prop) {
			res.EnrolledNotEligible = append(res.EnrolledNotEligible, propositionChoice(prop))
		}
	}
	for _, a := range rec.Assets {
		for _, pe := range a.Propositions {
			if pe.IsEligible || len(pe.Issues) == 0 {
				continue
			}
			reason := Reason{Asset: cmp.Or(described[a.AssetID], "A device"), Proposition: PropositionName(string(pe.Proposition))}
			for _, code := range pe.Issues {
				if slices.Contains(rec.SiteIssues, code) {
					continue // said once, for the home
				}
				if sentence := Explain(string(code)); !slices.Contains(reason.Sentences, sentence) {
					reason.Sentences = append(reason.Sentences, sentence)
				}
			}
			if len(reason.Sentences) > 0 {
				res.Reasons = append(res.Reasons, reason)
			}
		}
	}
	if len(rec.SiteIssues) > 0 {
		home := Reason{Asset: "Your home", Proposition: "every programme"}
		for _, code := range rec.SiteIssues {
			home.Sentences = append(home.Sentences, Explain(string(code)))
		}
		res.Reasons = append([]Reason{home}, res.Reasons...)
	}
	return res, nil
}

// enrolment is the enrol step: the household's choice of a proposition to join or leave.
// Joining is the household's own explicit choice, so it also overrides a withdrawal it
// recorded earlier (override_withdrawal), which an organisation's request must state itself.
// A refused enrolment is answered with its status and, as detail, the refusal in plain words.
func (d *Door) enrolment(join bool) web.Handler {
	return func(r *http.Request, p *auth.Principal) (any, error) {
		var prop flexv1.PropositionName
		err := readBody(r, func(f *web.Fields, body map[string]any) {
			prop, _ = web.Enum(f, body, []any{"body"}, "proposition", true, flexv1.AllPropositions)
		})
		if err != nil {
			if join {
				app.CountEnrolment(err)
			}
			return nil, err
		}
		id, err := d.ownSiteID(r, p)
		if err != nil {
			if join {
				app.CountEnrolment(err)
			}
			return nil, err
		}
		if !join {
			return d.Households.Unenrol(r.Context(), p, id, prop)
		}
		out, err := d.Households.Enrol(r.Context(), p, id, app.EnrolInput{Proposition: prop, Override: true})
		if e := app.As(err); e != nil && e.Code != "" {
			plain := *e
			plain.Detail = RefusalWords(e.Code)
			return nil, &plain
		}
		return out, err
	}
}

// Rewards answers GET /hosted/api/rewards: the balance and the newest page of the history,
// in words.
type Rewards struct {
	Info                        rewards.BalanceInfo `json:"info"`
	DaysUntilMinimumWaitTimeMet int                 `json:"days_until_minimum_wait_time_met"`
	Transactions                []Transaction       `json:"transactions"`
	// FlexEvents are the settled flex events, newest first: a sentence, a chart (SVG
	// markup, escaped and drawn by the server) and its figures; and what the household's
	// devices did in them, also in events not settled yet (no sentence, no chart then).
	FlexEvents []FlexEvent `json:"flex_events"`
	// ChargingWindows say when the household's car will charge (price_curve households); []
	// when none.
	ChargingWindows []string `json:"charging_windows"`
	// BatteryPlans are the plans of the household's batteries while its site is actively
	// enrolled in full_asset_schedule_control: a sentence, a chart (SVG markup, escaped and
	// drawn by the server) and its steps; [] otherwise.
	BatteryPlans []BatteryPlan `json:"battery_plans"`
}

// BatteryPlan is one battery's plan, drawn (internal/web/batterychart).
type BatteryPlan struct {
	Sentence string             `json:"sentence"`
	ChartSVG string             `json:"chart_svg"`
	Rows     []batterychart.Row `json:"rows"`
}

// FlexEvent is one flex event of the household, drawn (internal/web/flexchart).
type FlexEvent struct {
	Day      string          `json:"day"`
	Sentence string          `json:"sentence"`
	ChartSVG string          `json:"chart_svg"`
	Rows     []flexchart.Row `json:"rows"`
	// Devices say what its devices did, from their executed dispatches ("Your charger was
	// paused from 17:30 to 18:30"); [] when none.
	Devices []string `json:"devices"`
}

// Transaction is one line of the household's history.
type Transaction struct {
	Date        string `json:"date"`
	Description string `json:"description"`
	CreditPence int64  `json:"credit_pence"`
}

func (d *Door) rewards(r *http.Request, p *auth.Principal) (any, error) {
	id, err := d.ownSiteID(r, p)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	info, err := d.Rewards.Info(ctx, p, id)
	if err != nil {
		return nil, err
	}
	page, err := d.Rewards.Transactions(ctx, p, id, app.Paging{Limit: 100})
	if err != nil {
		return nil, err
	}
	history := page.Response()
	out := Rewards{Info: info, DaysUntilMinimumWaitTimeMet: history.DaysUntilMinimumWaitTimeMet,
		Transactions: make([]Transaction, 0, len(history.Transactions))}
	for _, t := range history.Transactions { // newest first, as the REST API orders them
		out.Transactions = append(out.Transactions, Transaction{Date: household.TransactionDay(t.StartTime, t.SettlementDate),
			CreditPence: t.CreditPence, Description: household.TransactionWords(string(t.TransactionType), string(t.PaymentStatus))})
	}
	out.ChargingWindows = []string{}
	if d.Pricing != nil {
		windows, err := d.Pricing.ChargingWindowsForSite(ctx, p, id)
		if err != nil {
			return nil, err
		}
		out.ChargingWindows = append(out.ChargingWindows, windows...)
	}
	out.FlexEvents = []FlexEvent{}
	if d.FlexEvents != nil {
		evs, err := d.FlexEvents.ForSite(ctx, p, id)
		if err != nil {
			return nil, err
		}
		for _, ev := range flexchart.Of(evs.Events) {
			out.FlexEvents = append(out.FlexEvents, FlexEvent{Day: ev.Day, Sentence: ev.Sentence,
				ChartSVG: string(ev.Chart), Rows: ev.Rows, Devices: append([]string{}, ev.Devices...)})
		}
	}
	out.BatteryPlans = []BatteryPlan{}
	if d.Pricing != nil {
		plans, err := d.Pricing.HouseholdBatteryPlans(ctx, p, id)
		if err != nil {
			return nil, err
		}
		for i, plan := range plans {
			drawn := batterychart.Draw("battery-plan-"+strconv.Itoa(i+1), plan.Steps, plan.Prices)
			out.BatteryPlans = append(out.BatteryPlans, BatteryPlan{Sentence: drawn.Sentence, ChartSVG: string(drawn.Chart),
				Rows: drawn.Rows})
		}
	}
	return out, nil
}

package facade

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/hostedflow"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/units"
	"github.com/flexsite/flexsite/internal/validation"
)

// The hosted flow (hosted-flow.md): GET /hosted/flow serves the embeddable page
// (internal/hostedflow), and the routes under /hosted/api are the page's own JSON routes.
// They take only an end-user (component) token, and only when the page reports, in
// EmbedderOriginHeader, that the token came from a message of the token's allowed_origin.
// Each one translates the page's form into the body of the REST route that does the same
// thing and calls that route's handler for the token's own site: the flow answers exactly as
// the REST API does, through the same household core, and re-implements no rule.

// assetIDParam is the path parameter of an asset's id.
const assetIDParam = "asset_id"

// EmbedderOriginHeader carries, on every /hosted/api call, the origin the browser reported
// for the message that handed the page its token (MessageEvent.origin).
const EmbedderOriginHeader = "Flexsite-Embedder-Origin"

// routeEntry is one row of the route table.
type routeEntry = struct {
	Route
	h http.Handler
}

func (s *Server) hostedRoutes() []routeEntry {
	api := s.hostedAPI
	return []routeEntry{
		{Route{http.MethodGet, "/hosted/flow"}, http.HandlerFunc(s.hostedPage)},
		{Route{http.MethodGet, "/hosted/flow.js"}, hostedFile("flow.js")},
		{Route{http.MethodGet, "/hosted/flow.css"}, hostedFile("flow.css")},
		{Route{http.MethodGet, "/hosted/api/household"}, api(s.hostedHousehold)},
		{Route{http.MethodPut, "/hosted/api/address"}, api(s.hostedAddress)},
		{Route{http.MethodPut, "/hosted/api/consent"}, api(s.hostedConsent)},
		{Route{http.MethodPost, "/hosted/api/assets"}, api(s.hostedAddAsset)},
		{Route{http.MethodDelete, "/hosted/api/assets/{asset_id}"}, api(s.hostedDeleteAsset)},
		{Route{http.MethodGet, "/hosted/api/eligibility"}, api(s.hostedEligibility)},
		{Route{http.MethodPost, "/hosted/api/enrol"}, api(s.hostedEnrolment(s.enrol, true))},
		{Route{http.MethodPost, "/hosted/api/unenrol"}, api(s.hostedEnrolment(s.unenrol, false))},
		{Route{http.MethodGet, "/hosted/api/rewards"}, api(s.hostedRewards)},
	}
}

// pageHeaders are the headers of everything under /hosted/.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

func (s *Server) hostedPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page, err := hostedflow.Render(hostedflow.ThemeFrom(q.Get("primary"), q.Get("background")))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pageHeaders(w)
	w.Header().Set("Content-Security-Policy", page.CSP)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(page.HTML)))
	_, _ = w.Write(page.HTML)
}

func hostedFile(name string) http.Handler {
	a := hostedflow.Assets[name]
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		pageHeaders(w)
		w.Header().Set("Content-Type", a.ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(a.Body)))
		_, _ = w.Write(a.Body)
	})
}

var (
	errHostedNeedsComponentToken = fail(http.StatusForbidden, "The hosted flow's routes need a component (end-user) token")
	errHostedWrongOrigin         = fail(http.StatusForbidden, "This token was not handed over by its allowed origin")
)

// hostedAPI authenticates a /hosted/api route: an end-user token whose allowed_origin is the
// origin the page reports for the message that brought it.
func (s *Server) hostedAPI(h handler) http.Handler {
	inner := s.authenticated(func(r *http.Request, p *auth.Principal) (any, error) {
		if p.Kind != auth.KindEndUser {
			return nil, errHostedNeedsComponentToken
		}
		if o := r.Header.Get(EmbedderOriginHeader); o == "" || o != p.AllowedOrigin {
			return nil, errHostedWrongOrigin
		}
		return h(r, p)
	}, true)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pageHeaders(w)
		w.Header().Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		inner.ServeHTTP(w, r)
	})
}

// ownSite is the token's site (the cache first, then the API server), the same user's only.
func (s *Server) ownSite(r *http.Request, p *auth.Principal) (*flexv1.Site, error) {
	ctx := r.Context()
	site, err := s.store(false).siteByName(ctx, p.Namespace, p.SiteName)
	if err == nil && site == nil {
		site, err = s.store(true).siteByName(ctx, p.Namespace, p.SiteName)
	}
	if err != nil {
		return nil, err
	}
	if site == nil || !site.DeletionTimestamp.IsZero() || site.Annotations[UserIDAnnotation] != p.UserID {
		return nil, errSiteNotFound
	}
	return site, nil
}

// delegate calls a REST handler for the token's own site with a body of its own form: the
// request is r's (context, principal, headers) with that JSON body and the path values given.
func delegate(h handler, r *http.Request, p *auth.Principal, body any, path map[string]string) (any, error) {
	r2 := r.Clone(r.Context())
	r2.Body, r2.ContentLength = http.NoBody, 0
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(data)), int64(len(data))
		r2.Header.Set("Content-Type", "application/json")
	}
	r2.URL.RawQuery = ""
	for k, v := range path {
		r2.SetPathValue(k, v)
	}
	return h(r2, p)
}

// HostedHousehold answers GET /hosted/api/household: what the flow shows, and where it starts.
type HostedHousehold struct {
	SiteID               string                   `json:"site_id"`
	AllowedOrigin        string                   `json:"allowed_origin"`
	StartStep            string                   `json:"start_step"`
	Site                 HostedSite               `json:"site"`
	Assets               []HostedAsset            `json:"assets"`
	EnrolledPropositions []flexv1.PropositionName `json:"enrolled_propositions"`
	Catalogue            HostedCatalogue          `json:"catalogue"`
}

// HostedSite is the household's stored address and consent.
type HostedSite struct {
	Postcode                   string  `json:"postcode"`
	StreetAddress              string  `json:"street_address"`
	MPAN                       string  `json:"mpan"`
	GaveBoundaryMeterConsentAt *string `json:"gave_boundary_meter_consent_at"`
}

// HostedAsset is one of the household's assets as the flow lists it.
type HostedAsset struct {
	ID               string           `json:"id"`
	Type             flexv1.AssetType `json:"type"`
	AssetModel       string           `json:"asset_model"`
	InstallationDate string           `json:"installation_date"`
	PowerKW          *float64         `json:"power_kw"`
	Description      string           `json:"description"`
}

// HostedCatalogue is what the assets step offers: the creatable types, and the models.
type HostedCatalogue struct {
	AssetTypes  []HostedChoice `json:"asset_types"`
	AssetModels []HostedModel  `json:"asset_models"`
}

// HostedChoice is a value and the words a household reads for it.
type HostedChoice struct {
	Value       string `json:"value"`
	Label       string `json:"label"`
	Description string `json:"description,omitempty"`
}

// HostedModel is one model of the asset-model catalogue.
type HostedModel struct {
	Model      string             `json:"model"`
	Label      string             `json:"label"`
	AssetTypes []flexv1.AssetType `json:"asset_types"`
}

// hostedObjects are what both hosted steps read of a site: its assets (by name) and the
// propositions it is enrolled in (sorted; enrolments being deleted left out).
func (s *Server) hostedObjects(ctx context.Context, site *flexv1.Site) ([]flexv1.Asset, []flexv1.PropositionName, error) {
	assets, err := s.store(false).assetsOf(ctx, site)
	if err != nil {
		return nil, nil, err
	}
	enrolments, err := s.store(true).enrolmentsOf(ctx, site)
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(assets, func(a, b flexv1.Asset) int { return strings.Compare(a.Name, b.Name) })
	enrolled := []flexv1.PropositionName{}
	for _, e := range enrolments {
		if e.DeletionTimestamp.IsZero() && !slices.Contains(enrolled, e.Spec.Proposition) {
			enrolled = append(enrolled, e.Spec.Proposition)
		}
	}
	slices.Sort(enrolled)
	return assets, enrolled, nil
}

func (s *Server) hostedHousehold(r *http.Request, p *auth.Principal) (any, error) {
	ctx := r.Context()
	site, err := s.ownSite(r, p)
	if err != nil {
		return nil, err
	}
	assets, enrolled, err := s.hostedObjects(ctx, site)
	if err != nil {
		return nil, err
	}
	models := &flexv1.AssetModelList{}
	if err := s.Cache.List(ctx, models); err != nil {
		return nil, err
	}
	out := HostedHousehold{
		SiteID: site.Labels[flexv1.IDLabel], AllowedOrigin: p.AllowedOrigin,
		Site: HostedSite{Postcode: site.Spec.Postcode, StreetAddress: site.Spec.StreetAddress, MPAN: site.Spec.MPAN,
			GaveBoundaryMeterConsentAt: formatTime(site.Spec.BoundaryMeterConsentAt)},
		Assets:               make([]HostedAsset, 0, len(assets)),
		EnrolledPropositions: enrolled,
	}
	for i := range assets {
		out.Assets = append(out.Assets, hostedAsset(&assets[i]))
	}
	for _, t := range flexv1.CreatableAssetTypes {
		out.Catalogue.AssetTypes = append(out.Catalogue.AssetTypes, HostedChoice{Value: string(t), Label: hostedflow.AssetTypeName(string(t))})
	}
	out.Catalogue.AssetModels = make([]HostedModel, 0, len(models.Items))
	for _, m := range models.Items {
		label := strings.TrimSpace(m.Spec.Manufacturer + " " + m.Spec.ModelName)
		out.Catalogue.AssetModels = append(out.Catalogue.AssetModels, HostedModel{Model: m.Spec.ModelName, Label: label,
			AssetTypes: nonNil(m.Spec.AssetTypes)})
	}
	slices.SortFunc(out.Catalogue.AssetModels, func(a, b HostedModel) int { return cmp.Compare(a.Label, b.Label) })
	out.StartStep = hostedflow.StartStep(hostedflow.Progress{
		HasAddress: site.Spec.MPAN != "" && site.Spec.Postcode != "", HasConsent: site.Spec.BoundaryMeterConsentAt != nil,
		Assets: len(out.Assets), Enrolments: len(out.EnrolledPropositions)})
	return out, nil
}

func hostedAsset(a *flexv1.Asset) HostedAsset {
	out := HostedAsset{ID: a.Labels[flexv1.IDLabel], Type: a.Spec.Type, AssetModel: a.Spec.Model,
		InstallationDate: a.Spec.InstallationDate, PowerKW: units.ToKilo(a.Spec.PowerW)}
	parts := []string{hostedflow.AssetTypeName(string(a.Spec.Type))}
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

// hostedAddress is the address step: PATCH /entities/site/{id} with postcode, address and
// MPAN, the postcode and MPAN required (the step is complete with both).
func (s *Server) hostedAddress(r *http.Request, p *auth.Principal) (any, error) {
	body, err := decodeJSON(r)
	if err != nil {
		return nil, err
	}
	f := &fields{}
	loc := []any{"body"}
	postcode, _ := f.str(body, loc, "postcode", true)
	mpan, _ := f.str(body, loc, "mpan", true)
	street, hasStreet := f.str(body, loc, "street_address", false)
	if err := f.err(); err != nil {
		return nil, err
	}
	site, err := s.ownSite(r, p)
	if err != nil {
		return nil, err
	}
	patch := map[string]any{"postcode": postcode, "mpan": mpan}
	if hasStreet {
		patch["address"] = street
	}
	return delegate(s.patchSite, r, p, patch, map[string]string{"site_id": site.Labels[flexv1.IDLabel]})
}

// hostedConsent is the consent step: a ticked box records the consent now (meter-consent);
// a consent already recorded keeps its time.
func (s *Server) hostedConsent(r *http.Request, p *auth.Principal) (any, error) {
	body, err := decodeJSON(r)
	if err != nil {
		return nil, err
	}
	f := &fields{}
	consents := f.boolean(body, []any{"body"}, "gave_boundary_meter_consent")
	if err := f.err(); err != nil {
		return nil, err
	}
	site, err := s.ownSite(r, p)
	if err != nil {
		return nil, err
	}
	if !consents || site.Spec.BoundaryMeterConsentAt != nil {
		return map[string]any{"gave_boundary_meter_consent_at": formatTime(site.Spec.BoundaryMeterConsentAt)}, nil
	}
	return delegate(s.meterConsent, r, p, map[string]any{"gave_boundary_meter_consent_at": s.Now().UTC().Format(time.RFC3339)},
		map[string]string{"site_id": site.Labels[flexv1.IDLabel]})
}

// hostedAddAsset is the assets step: POST /entities/asset for the token's site, with an
// external id of the flow's own making.
func (s *Server) hostedAddAsset(r *http.Request, p *auth.Principal) (any, error) {
	body, err := decodeJSON(r)
	if err != nil {
		return nil, err
	}
	site, err := s.ownSite(r, p)
	if err != nil {
		return nil, err
	}
	asset := map[string]any{"site_id": site.Labels[flexv1.IDLabel], "external_id": "hosted-" + identity.NewID(),
		"type": body["type"]}
	for _, k := range []string{"asset_model", "installation_date"} {
		if v, ok := body[k]; ok && v != "" {
			asset[k] = v
		}
	}
	if v, ok := body["power_kw"]; ok && v != "" && v != nil {
		// A number typed into the form arrives as text: a number when it reads as one, else
		// the text itself, which the API's own check refuses.
		if text, isText := v.(string); isText {
			if n, err := strconv.ParseFloat(strings.TrimSpace(text), 64); err == nil {
				v = n
			}
		}
		asset["properties"] = map[string]any{"power_kw": v}
	}
	return delegate(s.createAsset, r, p, asset, nil)
}

// hostedDeleteAsset removes one of the household's own assets (DELETE /entities/asset/{id}).
func (s *Server) hostedDeleteAsset(r *http.Request, p *auth.Principal) (any, error) {
	id, err := validation.ParseUUID(r.PathValue(assetIDParam))
	if err != nil {
		// The REST handler answers a malformed id itself, before it reads anything.
		return delegate(s.deleteAsset, r, p, nil, nil)
	}
	asset, err := s.store(false).assetByID(r.Context(), p.Namespace, id)
	if err != nil {
		return nil, err
	}
	if asset == nil || asset.Spec.SiteName != p.SiteName {
		return nil, errAssetNotFound
	}
	if _, err := s.ownSite(r, p); err != nil {
		return nil, err
	}
	return delegate(s.deleteAsset, r, p, nil, map[string]string{assetIDParam: id})
}

// HostedEligibility answers GET /hosted/api/eligibility: the eligibility record of the REST
// API and the same in plain words.
type HostedEligibility struct {
	Record              *EligibilityRecord `json:"record"`
	Eligible            []HostedChoice     `json:"eligible"`
	EnrolledNotEligible []HostedChoice     `json:"enrolled_not_eligible"`
	Reasons             []HostedReason     `json:"reasons"`
}

// HostedReason says why one asset does not qualify for one proposition.
type HostedReason struct {
	Asset       string   `json:"asset"`
	Proposition string   `json:"proposition"`
	Sentences   []string `json:"sentences"`
}

func propositionChoice(p flexv1.PropositionName) HostedChoice {
	return HostedChoice{Value: string(p), Label: hostedflow.PropositionName(string(p)),
		Description: hostedflow.PropositionDescription(string(p))}
}

func (s *Server) hostedEligibility(r *http.Request, p *auth.Principal) (any, error) {
	site, err := s.ownSite(r, p)
	if err != nil {
		return nil, err
	}
	out, err := delegate(s.eligibilityRecordOf, r, p, nil, map[string]string{"site_id": site.Labels[flexv1.IDLabel]})
	if err != nil {
		return nil, err
	}
	rec := out.(*EligibilityRecord)
	assets, enrolled, err := s.hostedObjects(r.Context(), site)
	if err != nil {
		return nil, err
	}
	described := map[string]string{}
	for i := range assets {
		described[assets[i].Labels[flexv1.IDLabel]] = hostedAsset(&assets[i]).Description
	}
	res := HostedEligibility{Record: rec, Eligible: []HostedChoice{}, EnrolledNotEligible: []HostedChoice{}, Reasons: []HostedReason{}}
	for _, prop := range rec.EligiblePropositions {
		res.Eligible = append(res.Eligible, propositionChoice(prop))
	}
	for _, prop := range flexv1.AllPropositions {
		if slices.Contains(enrolled, prop) && !slices.Contains(rec.EligiblePropositions, prop) {
			res.EnrolledNotEligible = append(res.EnrolledNotEligible, propositionChoice(prop))
		}
	}
	for _, a := range rec.Assets {
		for _, pe := range a.Propositions {
			if pe.IsEligible || len(pe.Issues) == 0 {
				continue
			}
			reason := HostedReason{Asset: cmp.Or(described[a.AssetID], "A device"), Proposition: hostedflow.PropositionName(string(pe.Proposition))}
			for _, code := range pe.Issues {
				if slices.Contains(rec.SiteIssues, code) {
					continue // said once, for the home
				}
				if sentence := hostedflow.Explain(string(code)); !slices.Contains(reason.Sentences, sentence) {
					reason.Sentences = append(reason.Sentences, sentence)
				}
			}
			if len(reason.Sentences) > 0 {
				res.Reasons = append(res.Reasons, reason)
			}
		}
	}
	if len(rec.SiteIssues) > 0 {
		home := HostedReason{Asset: "Your home", Proposition: "every programme"}
		for _, code := range rec.SiteIssues {
			home.Sentences = append(home.Sentences, hostedflow.Explain(string(code)))
		}
		res.Reasons = append([]HostedReason{home}, res.Reasons...)
	}
	return res, nil
}

// hostedEnrolment is the enrol step: POST /entities/site/{id}/enrol or /unenrol with the
// household's choice. Joining is the household's own explicit choice, so it also overrides
// a withdrawal it recorded earlier (override_withdrawal), which an organisation's request
// must state itself. A refused enrolment is answered with its status and, as detail, the
// refusal in plain words.
func (s *Server) hostedEnrolment(h handler, join bool) handler {
	return func(r *http.Request, p *auth.Principal) (any, error) {
		body, err := decodeJSON(r)
		if err != nil {
			return nil, err
		}
		site, err := s.ownSite(r, p)
		if err != nil {
			return nil, err
		}
		choice := map[string]any{"proposition": body["proposition"]}
		if join {
			choice["override_withdrawal"] = true
		}
		out, err := delegate(h, r, p, choice, map[string]string{"site_id": site.Labels[flexv1.IDLabel]})
		var ae *apiError
		if errors.As(err, &ae) && ae.refusal != "" {
			plain := *ae
			plain.detail = hostedflow.RefusalWords(ae.refusal)
			return nil, &plain
		}
		return out, err
	}
}

// HostedRewards answers GET /hosted/api/rewards: /rewards/{id}/info and the newest page of
// /rewards/{id}/transactions, in words.
type HostedRewards struct {
	Info                        BalanceInfo         `json:"info"`
	DaysUntilMinimumWaitTimeMet int                 `json:"days_until_minimum_wait_time_met"`
	Transactions                []HostedTransaction `json:"transactions"`
}

// HostedTransaction is one line of the household's history.
type HostedTransaction struct {
	Date        string `json:"date"`
	Description string `json:"description"`
	CreditPence int64  `json:"credit_pence"`
}

func (s *Server) hostedRewards(r *http.Request, p *auth.Principal) (any, error) {
	site, err := s.ownSite(r, p)
	if err != nil {
		return nil, err
	}
	path := map[string]string{"site_id": site.Labels[flexv1.IDLabel]}
	info, err := delegate(s.rewardInfo, r, p, nil, path)
	if err != nil {
		return nil, err
	}
	txs, err := delegate(s.transactions, r, p, nil, path)
	if err != nil {
		return nil, err
	}
	page := txs.(*transactionsPage).response() // the REST answer, as records
	out := HostedRewards{Info: info.(BalanceInfo), DaysUntilMinimumWaitTimeMet: page.DaysUntilMinimumWaitTimeMet,
		Transactions: make([]HostedTransaction, 0, len(page.Transactions))}
	for _, t := range page.Transactions { // newest first, as the REST API orders them
		date := t.SettlementDate
		if t.StartTime != nil {
			date = (*t.StartTime)[:len("2006-01-02")]
		}
		out.Transactions = append(out.Transactions, HostedTransaction{Date: date, CreditPence: t.CreditPence,
			Description: hostedflow.TransactionWords(string(t.TransactionType), string(t.PaymentStatus))})
	}
	return out, nil
}

package server_test

import (
	"cmp"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/hostedflow"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/rewardstore"
	"github.com/flexsite/flexsite/internal/testenv"
)

// The authorisation matrix: every authenticated route × every kind of caller, each cell
// with the one status it must answer. A route added to the REST API without a row here fails
// the spec, so no route escapes the matrix.

// matrixCaller is a column of the matrix.
type matrixCaller int

const (
	callerNoToken matrixCaller = iota
	callerMalformed
	callerExpired
	callerBadSignature
	callerAlgNone
	callerUnknownKid
	callerOtherOrg
	callerOtherSiteUser
	callerThisSiteUser
	callerLacksRole
	matrixCallers // the number of columns
)

func (c matrixCaller) String() string {
	return [...]string{"no token", "malformed token", "expired token", "bad signature", "alg none",
		"unknown kid", "another organisation", "end user of another site", "end user of this site",
		"organisation token lacking the role"}[c]
}

// matrixRoute is a row: what the route needs, and a request that is valid for a caller
// allowed to make it.
type matrixRoute struct {
	role flexv1.Role // "" when any organisation token will do
	// scoped: the route reaches one of the organisation's own objects by id (a site, or an
	// asset): another organisation must get 404, never 403.
	scoped bool
	// endUser: end-user tokens are admitted (for their own site).
	endUser bool
	body    func(caller matrixCaller) any
	// success is the status of an allowed call: 200 unless set (DELETE answers 204).
	success int
	// query is appended to the path (a valid query for an allowed caller).
	query string
	// hosted: a route of the hosted flow (/hosted/api): end-user tokens only, each for its own
	// site, sent with the header naming the token's allowed origin; organisation tokens get 403
	// before anything is looked up. otherUser is what the other end user of the organisation
	// gets on their own site (200 unless set); path replaces the route's concrete path.
	hosted    bool
	otherUser int
	path      string
}

var _ = Describe("The authorisation matrix", Ordered, func() {
	var (
		a, b               org
		tokA, tokB         string
		tokUser, tokOther  string
		lacking            map[flexv1.Role]string // org A clients, each without one role
		noRoles            string                 // an org A client without any role
		bad                map[matrixCaller]string
		siteID, mpanSiteID string
		otherUserSiteID    string
		assetID, extID     string
		subID              string
		withdrawalID       string
		flexEventID        string
		dispatchID         string
		pricesCharger      string   // the MPAN site's charger, whose site is on price_curve
		secretsOfA         []string // what another organisation must never see
	)

	BeforeAll(func(ctx SpecContext) {
		every := []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards, flexv1.RoleComponents,
			flexv1.RoleRewardsWrite, flexv1.RoleRewardsAdmin, flexv1.RoleFlexEventsWrite, flexv1.RolePricesWrite}
		a, b = newOrg(ctx, every...), newOrg(ctx, every...)
		tokA, tokB = a.token(), b.token()

		// Org A: the end user U whose site is the target of every site route, with a qualifying
		// charger (so that U may enrol), another end user V, and a site onboarded by MPAN.
		const consent = "gave_boundary_meter_consent_at"
		tokUser = mustCall("POST", "/auth/component-token", tokA, componentForm("matrix-user", consent, "2026-01-15T10:30:00Z"))["access_token"].(string)
		tokOther = mustCall("POST", "/auth/component-token", tokA, componentForm("matrix-other", consent, "2026-01-15T10:30:00Z"))["access_token"].(string)
		siteID = userSite(ctx, a.Namespace, "matrix-user").Labels[flexv1.IDLabel]
		otherUserSiteID = userSite(ctx, a.Namespace, "matrix-other").Labels[flexv1.IDLabel]
		// U's household gets its MPAN from the organisation (initialise naming the same user):
		// until then nothing is eligible.
		mustCall("POST", "/entities/site/initialise", tokA, map[string]any{
			"site":   map[string]any{"mpan": "1300000000016", "postcode": "SW1A 1AA", "external_user_id": "matrix-user"},
			"assets": []any{map[string]any{"external_id": "matrix-battery-" + a.Namespace, "type": "battery"}}})
		extID = "matrix-charger-" + a.Namespace
		assetID = mustCall("POST", "/entities/asset", tokA, map[string]any{"external_id": extID, "type": "charger",
			"site_id": siteID, "asset_model": "zappi", "installation_date": "2025-06-15",
			"properties": map[string]any{"power_kw": 7.4}})["id"].(string)
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/entities/site/"+siteID+"/eligibility", tokUser, nil)["eligible_propositions"]
		}).Should(ContainElement("limited_pause"))
		mpanSiteID = onboardedSite(tokA, "1200000000011")
		// A notification subscription of A (.invalid never resolves; no deliverer runs here).
		status, created := call("POST", "/notifications/subscriptions", tokA, map[string]any{"url": "https://hooks.flexsite.invalid/matrix"})
		Expect(status).To(Equal(http.StatusCreated), "%s", created)
		subID = created.Map()["id"].(string)
		// A withdrawal of U's site, whose payment status the matrix moves on.
		withdrawalID = identity.NewID()
		_, _, err := (&rewardstore.Store{Pool: testDB.Pool}).Append(ctx, rewardstore.Site{Namespace: a.Namespace, ID: siteID},
			flexv1.RewardTransaction{ID: withdrawalID, Type: "withdrawal", CreditPence: -100, SettlementDate: "2026-11-01",
				PaymentStatus: "pending_approval"}, rewardstore.SourceWithdrawal)
		Expect(err).NotTo(HaveOccurred())
		// A flex event of A.
		status, created = call("POST", "/flex-events", tokA, flexEventBody)
		Expect(status).To(Equal(http.StatusCreated), "%s", created)
		flexEventID = created.Map()["id"].(string)
		// A dispatch of it to A's charger, whose status the matrix reports (issued straight into
		// the database: the issuing controller is not what the matrix is about).
		start := time.Now().UTC().Truncate(30 * time.Minute).Add(24 * time.Hour)
		_, err = (&dispatchstore.Store{Pool: testDB.Pool}).Issue(ctx, a.Namespace, "https://flexsite.test",
			[]dispatchstore.Dispatch{{FlexEvent: flexEventID, SiteID: siteID, AssetID: assetID, MarketID: "limited_pause",
				From: start, To: start.Add(time.Hour), EventTimestamp: time.Now()}}, nil, time.Now())
		Expect(err).NotTo(HaveOccurred())
		dispatchID = dispatch.EventID(a.Namespace, flexEventID, assetID).String()
		mpanAssets := mustCall("GET", "/entities/site/"+mpanSiteID, tokA, nil)["asset_ids"].([]any)
		// The MPAN site is on price_curve too, so that its price curves exist for A (another
		// organisation's 404 is then the organisation's, not the enrolment's), and A has
		// declared a day of the matrix's market.
		mustCall("POST", "/entities/site/"+mpanSiteID+"/enrol", tokA, map[string]any{"proposition": "price_curve"})
		entityWaitActive(ctx, client.ObjectKey{Namespace: a.Namespace,
			Name: identity.EnrolmentName(identity.SiteNameForMPAN("1200000000011"), flexv1.PropositionPriceCurve)})
		pricesCharger = mustCall("GET", "/entities/asset/external-id/charger-1200000000011", tokA, nil)["id"].(string)
		Expect(mustCall("GET", "/entities/site/"+mpanSiteID+"/price-curve", tokA, nil)).To(HaveKey("half_hourly_traded_prices"))
		status, declared := call("PUT", "/market-prices/matrix/2027-01-10", tokA, dayPrices(Default, "2027-01-10", 48, pence))
		Expect(status).To(Equal(http.StatusCreated), "%s", declared)
		secretsOfA = make([]string, 0, 8+len(mpanAssets))
		secretsOfA = append(secretsOfA, siteID, otherUserSiteID, mpanSiteID, assetID, extID, "1200000000011", "charger-1200000000011", subID)
		for _, id := range mpanAssets {
			secretsOfA = append(secretsOfA, id.(string))
		}

		// Org A clients that each lack one role, and one without roles.
		lacking = map[flexv1.Role]string{}
		all := every
		for _, missing := range append(all, "") {
			roles := []flexv1.Role{} // not nil: the CRD requires the list, empty or not
			for _, r := range all {
				if missing != "" && r != missing {
					roles = append(roles, r)
				}
			}
			c := org{Namespace: a.Namespace, Username: fmt.Sprintf("%s-lacks-%s", a.Username, strings.ReplaceAll(string(missing), "_", "-")), Password: a.Password + "-x"}
			if missing == "" {
				c.Username = a.Username + "-no-roles"
			}
			Expect(bootstrap.EnsureOrganisation(ctx, k8sClient, bootstrap.Organisation{
				Namespace: c.Namespace, Username: c.Username, Password: c.Password, Roles: roles})).To(Succeed())
			if missing == "" {
				noRoles = c.token()
			} else {
				lacking[missing] = c.token()
			}
		}

		// Tokens that must not authenticate anyone.
		past := func() time.Time { return time.Now().Add(-2 * time.Hour) }
		expired, _, err := suiteIssuer(ctx, past).IssueOrganisationToken(orgPrincipal(a, all...))
		Expect(err).NotTo(HaveOccurred())
		_, foreign, err := ed25519.GenerateKey(rand.Reader)
		Expect(err).NotTo(HaveOccurred())
		kid, _ := activeSigningKey(ctx)
		forge := func(method jwt.SigningMethod, key any, kid string) string {
			tok := jwt.NewWithClaims(method, orgClaims(a))
			tok.Header["kid"] = kid
			s, err := tok.SignedString(key)
			Expect(err).NotTo(HaveOccurred())
			return s
		}
		bad = map[matrixCaller]string{
			callerMalformed:    "not-a-jwt",
			callerExpired:      expired,
			callerBadSignature: forge(jwt.SigningMethodEdDSA, foreign, kid),
			callerAlgNone:      forge(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, kid),
			callerUnknownKid:   forge(jwt.SigningMethodEdDSA, foreign, "00112233deadbeef"),
		}
	})

	It("answers every authenticated route as the caller deserves", func(ctx SpecContext) {
		seq := 0
		unique := func(prefix string) string { seq++; return fmt.Sprintf("%s-%d", prefix, seq) }
		jsonBody := func(v map[string]any) func(matrixCaller) any { return func(matrixCaller) any { return v } }
		noBody := func(matrixCaller) any { return nil }
		// Valid requests for an allowed caller. Organisation B's writes get their own MPANs
		// and external ids, so that nothing of A's is ever in their answers.
		// U's asset that the hosted flow's DELETE may remove (the matrix's own asset must stay).
		hostedAssetID := mustCall("POST", "/entities/asset", tokA, map[string]any{"external_id": unique("matrix-hosted"),
			"type": "battery", "site_id": siteID})["id"].(string)
		// A reference of A's search, which another organisation cannot open.
		ensureMeterRegister(ctx)
		meterRefOfA := meterRef(tokA, meterStreetPostcode, "12")
		// U and V each fill their own site, with MPANs of their own.
		hostedMPAN := map[matrixCaller]string{callerThisSiteUser: "3400000000016", callerOtherSiteUser: "3400000000025"}
		rows := map[string]matrixRoute{
			"POST /auth/component-token": {role: flexv1.RoleComponents, body: func(matrixCaller) any {
				return componentForm(unique("matrix-new-user"), "gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z")
			}},
			"GET /auth/users/me/":            {body: noBody},
			"POST /entities/site/onboard":    {role: flexv1.RoleEntityWrite, body: jsonBody(household("2301234567894"))},
			"POST /entities/site/initialise": {role: flexv1.RoleEntityWrite, body: jsonBody(household("2301234567894"))},
			"POST /entities/site/onboard-site-and-asset": {role: flexv1.RoleEntityWrite, body: func(matrixCaller) any {
				return legacyOnboardBody("1012345678903", unique("matrix-legacy"))
			}},
			// Each allowed call creates a site of its own: another MPAN, another address.
			"POST /entities/site": {role: flexv1.RoleEntityWrite, body: func(matrixCaller) any {
				return map[string]any{"mpan": validMPAN(880000 + seq), "postcode": "SW1A 1AA", "street_address": unique("1 Matrix Road")}
			}},
			"GET /entities/site":                                     {role: flexv1.RoleEntityRead, body: noBody},
			"GET /entities/site/{site_id}":                           {role: flexv1.RoleEntityRead, scoped: true, endUser: true, body: noBody},
			"POST /entities/site/{site_id}/offboard-site-and-assets": {role: flexv1.RoleEntityWrite, scoped: true, body: noBody},
			"PATCH /entities/site/{site_id}": {role: flexv1.RoleEntityWrite, scoped: true, endUser: true,
				body: jsonBody(map[string]any{"address": "1 Matrix Road"})},
			"GET /entities/site/{site_id}/eligibility": {role: flexv1.RoleEntityRead, scoped: true, endUser: true, body: noBody},
			"POST /entities/site/{site_id}/enrol": {role: flexv1.RoleEntityWrite, scoped: true, endUser: true,
				body: jsonBody(map[string]any{"proposition": "limited_pause"})},
			"POST /entities/site/{site_id}/unenrol": {role: flexv1.RoleEntityWrite, scoped: true, endUser: true,
				body: jsonBody(map[string]any{"proposition": "limited_pause"})},
			"POST /entities/site/{site_id}/meter-consent": {role: flexv1.RoleEntityWrite, scoped: true, endUser: true,
				body: jsonBody(map[string]any{"gave_boundary_meter_consent_at": "2026-02-01T00:00:00Z"})},
			// No caller of the matrix may delete: U's site has an asset, so even an allowed
			// caller would meet a 400, never remove it.
			"DELETE /entities/site/{site_id}": {role: flexv1.RoleEntityWrite, scoped: true, body: noBody},
			// Reads the caller's own organisation only: another organisation gets its own answer,
			// which says nothing of A's site with the same MPAN.
			"POST /entities/site/check-eligibility": {role: flexv1.RoleEntityRead,
				body: jsonBody(map[string]any{"mpan": "1200000000011", "asset_model": "zappi"})},
			"POST /entities/site/{site_id}/dispatch-consent": {role: flexv1.RoleEntityWrite, scoped: true, endUser: true,
				body: jsonBody(map[string]any{"dispatch_methods": []any{"limited_pause"}})},
			"POST /entities/site/{site_id}/dispatch-deconsent": {role: flexv1.RoleEntityWrite, scoped: true, endUser: true,
				body: jsonBody(map[string]any{"dispatch_methods": []any{"cm_infrequent_dispatch"}})},
			"POST /entities/asset": {role: flexv1.RoleEntityWrite, scoped: true, body: func(matrixCaller) any {
				return map[string]any{"external_id": unique("matrix-asset"), "type": "battery", "site_id": siteID}
			}},
			"GET /entities/asset":            {role: flexv1.RoleEntityRead, body: noBody},
			"GET /entities/asset/{asset_id}": {role: flexv1.RoleEntityRead, scoped: true, body: noBody},
			"PATCH /entities/asset/{asset_id}": {role: flexv1.RoleEntityWrite, scoped: true,
				body: jsonBody(map[string]any{"properties": map[string]any{"power_kw": 3.3}})},
			"DELETE /entities/asset/{asset_id}": {role: flexv1.RoleEntityWrite, scoped: true, body: noBody,
				success: http.StatusNoContent},
			"GET /entities/asset/external-id/{external_id}": {role: flexv1.RoleEntityRead, scoped: true, body: noBody},
			"POST /validation/mpan":                         {body: jsonBody(map[string]any{"mpan": meterMPAN(31)})},
			"GET /rewards/{site_id}/transactions":           {role: flexv1.RoleRewards, scoped: true, body: noBody},
			"GET /rewards/{site_id}/info":                   {role: flexv1.RoleRewards, scoped: true, body: noBody},
			"POST /rewards/{site_id}/transactions": {role: flexv1.RoleRewardsWrite, scoped: true, success: http.StatusCreated,
				body: func(matrixCaller) any {
					return map[string]any{"transaction_id": identity.NewID(), "transaction_type": "goodwill credit",
						"credit_pence": 5, "settlement_date": "2026-11-02"}
				}},
			"PATCH /rewards/{site_id}/transactions/{transaction_id}": {role: flexv1.RoleRewardsAdmin, scoped: true,
				body: jsonBody(map[string]any{"payment_status": "approved"})},
			// Not scoped: a batch names assets, each judged alone (another organisation's are
			// rejected in a 200, as unknown ones are). An asset of nobody's, so that no answer
			// echoes one of A's ids.
			"POST /data/readings": {role: flexv1.RoleEntityWrite, body: jsonBody(map[string]any{"readings": []any{
				map[string]any{"asset_id": "00000000-0000-4000-8000-000000000000", "label": "boundary_import_kw",
					"start_timestamp": "2026-04-14T17:00:00Z", "end_timestamp": "2026-04-14T17:30:00Z", "value": 1}}})},
			"GET /rewards/{site_id}/url/balance": {role: flexv1.RoleRewards, scoped: true, body: noBody,
				query: "?redirect_uri=https%3A%2F%2Fapp.example.com%2Fdone"},

			"GET /hosted/api/household": {hosted: true, body: noBody},
			"PUT /hosted/api/address": {hosted: true, body: func(c matrixCaller) any {
				return map[string]any{"postcode": "SW1A 1AA", "street_address": "1 Hosted Road", "mpan": cmp.Or(hostedMPAN[c], "3400000000034")}
			}},
			// Find my meter: a search of the register (none there is [], a 200 too).
			"GET /hosted/api/meters":      {hosted: true, body: noBody, query: "?postcode=SW1A%201AA"},
			"PUT /hosted/api/consent":     {hosted: true, body: jsonBody(map[string]any{"gave_boundary_meter_consent": true})},
			"POST /hosted/api/assets":     {hosted: true, body: jsonBody(map[string]any{"type": "battery", "power_kw": "5"})},
			"GET /hosted/api/eligibility": {hosted: true, body: noBody},
			// U left limited_pause above (REST unenrol), so U joins price_curve here and leaves it
			// below; V's site has only a battery of no known model: nothing to enrol in.
			"POST /hosted/api/enrol": {hosted: true, otherUser: http.StatusUnprocessableEntity,
				body: jsonBody(map[string]any{"proposition": "price_curve"})},
			"POST /hosted/api/unenrol": {hosted: true, body: jsonBody(map[string]any{"proposition": "price_curve"})},
			"GET /hosted/api/rewards":  {hosted: true, body: noBody},
			"DELETE /hosted/api/assets/{asset_id}": {hosted: true, otherUser: http.StatusNotFound, success: http.StatusNoContent,
				path: "/hosted/api/assets/" + hostedAssetID, body: noBody},

			// Device connections: U starts an authorisation (a Pending connection), lists it and
			// disconnects it; the token and redirect need nothing of the provider but its entry.
			"GET /entities/site/{site_id}/oauth/{provider}/initiate": {role: flexv1.RoleEntityWrite, scoped: true, endUser: true, body: noBody},
			"POST /entities/site/{site_id}/token": {role: flexv1.RoleEntityWrite, scoped: true,
				body: jsonBody(map[string]any{"refresh_token": "r", "access_token": "a", "expires_in": 3600})},
			"GET /entities/site/{site_id}/connections": {role: flexv1.RoleEntityRead, scoped: true, endUser: true, body: noBody},
			"DELETE /entities/site/{site_id}/connections/{provider}": {role: flexv1.RoleEntityWrite, scoped: true, endUser: true,
				body: noBody, success: http.StatusNoContent},
			"GET /hosted/api/connections": {hosted: true, body: noBody},
			"POST /hosted/api/connections/{provider}": {hosted: true, path: "/hosted/api/connections/" + deviceProviderName,
				body: noBody},

			// Notifications: another organisation makes and lists its own subscriptions.
			"POST /notifications/subscriptions": {role: flexv1.RoleEntityWrite, success: http.StatusCreated,
				body: jsonBody(map[string]any{"url": "https://hooks.flexsite.invalid/other"})},
			"GET /notifications/subscriptions": {role: flexv1.RoleEntityRead, body: noBody},
			// Flex events: another organisation declares and lists its own.
			"POST /flex-events":                                             {role: flexv1.RoleFlexEventsWrite, success: http.StatusCreated, body: jsonBody(flexEventBody)},
			"GET /flex-events":                                              {role: flexv1.RoleEntityRead, body: noBody},
			"GET /flex-events/{id}":                                         {role: flexv1.RoleEntityRead, scoped: true, body: noBody},
			"GET /entities/site/{site_id}/flex-events":                      {role: flexv1.RoleEntityRead, scoped: true, body: noBody},
			"GET /notifications/subscriptions/{subscription_id}":            {role: flexv1.RoleEntityRead, scoped: true, body: noBody},
			"GET /notifications/subscriptions/{subscription_id}/deliveries": {role: flexv1.RoleEntityRead, scoped: true, body: noBody},
			"DELETE /notifications/subscriptions/{subscription_id}":         {role: flexv1.RoleEntityWrite, scoped: true, body: noBody, success: http.StatusNoContent},
			"POST /notifications/subscriptions/{subscription_id}/test":      {role: flexv1.RoleEntityWrite, scoped: true, body: noBody, success: http.StatusAccepted},

			// What the devices tell Flexsite, about A's charger: another organisation's is not found.
			// The intent is posted before it is read (the routes' order).
			"POST /entities/asset/{asset_id}/event": {role: flexv1.RoleEntityWrite, scoped: true,
				body: jsonBody(map[string]any{"event_type": "plug_in"})},
			"POST /entities/asset/{asset_id}/event/plug-in":  {role: flexv1.RoleEntityWrite, scoped: true, body: jsonBody(map[string]any{})},
			"POST /entities/asset/{asset_id}/event/plug-out": {role: flexv1.RoleEntityWrite, scoped: true, body: jsonBody(map[string]any{})},
			"POST /entities/asset/{asset_id}/event/intent": {role: flexv1.RoleEntityWrite, scoped: true,
				body: jsonBody(map[string]any{"intent": map[string]any{"energy_required_kwh": 20, "ready_by": "2026-11-28T07:00:00Z"}})},
			"POST /entities/asset/{asset_id}/event/charge-now": {role: flexv1.RoleEntityWrite, scoped: true,
				body: jsonBody(map[string]any{"end_at": "2026-11-28T07:00:00Z"})},
			"POST /entities/asset/{asset_id}/event/charge-now-deleted": {role: flexv1.RoleEntityWrite, scoped: true, body: jsonBody(map[string]any{})},
			"POST /entities/asset/{asset_id}/event/tariff-update": {role: flexv1.RoleEntityWrite, scoped: true,
				body: jsonBody(map[string]any{"tariff": map[string]any{"off_peak_times": "00:00-07:00", "timezone": "Europe/London"}})},
			"GET /entities/asset/{asset_id}/intent": {role: flexv1.RoleEntityRead, scoped: true, body: noBody},
			// A's asset is a charger: the battery schedule tells an allowed caller 404 as it tells
			// a battery of a site not enrolled (the schedule itself: battery_schedule_test.go).
			"GET /entities/asset/{asset_id}/battery-schedule": {role: flexv1.RoleEntityRead, scoped: true, body: noBody,
				success: http.StatusNotFound},
			// The dispatch callback: the same status again is 200, so every allowed cell may send it
			// (ACCEPTED: the window starts tomorrow, and EXECUTED is refused until it has started).
			"POST /entities/asset/{asset_id}/callback/{event_id}": {role: flexv1.RoleEntityWrite, scoped: true,
				body: jsonBody(map[string]any{"timestamp": "2026-11-27T12:00:00Z", "status": "ACCEPTED"})},

			// Market prices: another organisation declares a day of its own (once: 201) and does
			// not find A's; the price curves of A's site on price_curve, and of its charger.
			"PUT /market-prices/{market}/{date}": {role: flexv1.RolePricesWrite, success: http.StatusCreated,
				path: "/market-prices/matrix/2027-01-11", body: jsonBody(dayPrices(Default, "2027-01-11", 48, pence))},
			"GET /market-prices/{market}/{date}": {role: flexv1.RoleEntityRead, scoped: true,
				path: "/market-prices/matrix/2027-01-10", body: noBody},
			"GET /entities/site/{site_id}/price-curve": {role: flexv1.RoleEntityRead, scoped: true,
				path: "/entities/site/" + mpanSiteID + "/price-curve", body: noBody},
			"GET /entities/asset/{asset_id}/price-curve": {role: flexv1.RoleEntityRead, scoped: true,
				path: "/entities/asset/" + pricesCharger + "/price-curve", body: noBody},
			// The matrix's site is not on price_curve: an allowed caller passes authorisation and
			// meets the 404 of a charger not on the proposition (pricing_ev_test.go answers
			// schedules); another organisation meets the same 404, never a 403.
			"POST /entities/asset/{asset_id}/event/plug-in-schedule": {role: flexv1.RoleEntityWrite, scoped: true,
				success: http.StatusNotFound, body: jsonBody(map[string]any{"charging_schedule": []any{map[string]any{
					"start_timestamp": "2026-11-28T01:00:00Z", "end_timestamp": "2026-11-28T02:00:00Z"}}})},
			// The meter-point register (meters_test.go): platform-wide, so another organisation
			// finds the same meter points, but never opens A's reference.
			"GET /meter/search": {role: flexv1.RoleEntityRead, body: noBody, query: "?postcode=TN11AA&building_identifier=12"},
			"GET /meter/by-ref/{meter_ref}": {role: flexv1.RoleEntityRead, scoped: true, body: noBody,
				path: "/meter/by-ref/" + meterRefOfA},
			"GET /meter/{meter_ref}/mpan": {role: flexv1.RoleEntityRead, scoped: true, body: noBody,
				path: "/meter/" + meterRefOfA + "/mpan"},
			"POST /meter/by-mpan":    {role: flexv1.RoleEntityRead, body: jsonBody(map[string]any{"mpan": meterMPAN(12)})},
			"GET /meter/{mpan}":      {role: flexv1.RoleEntityRead, body: noBody, path: "/meter/" + meterMPAN(12)},
			"POST /meter/by-address": {role: flexv1.RoleEntityRead, body: jsonBody(map[string]any{"address": oldBarnAddress})},
			"GET /meter/":            {role: flexv1.RoleEntityRead, body: noBody, path: meterByAddressQuery(oldBarnAddress)},
			// Prod's examples need an organisation's token of any role (OAuth2PasswordBearer).
			"GET /examples/dispatch-event":        {body: noBody},
			"GET /examples/ocpp-charging-profile": {body: noBody},
		}
		public := map[string]bool{"GET /healthz": true, "GET /readyz": true, "GET /openapi.json": true, "GET /docs": true,
			"POST /auth/token-form": true, "GET /hosted/flow": true, "GET /hosted/flow.js": true, "GET /hosted/flow.css": true,
			// The hosted rewards page takes no bearer token (a one-time link, then a session
			// cookie): its own matrix is in rewardspage_test.go.
			"GET /hosted/rewards/link/{code}": true, "GET /hosted/rewards": true, "POST /hosted/rewards/code": true,
			"POST /hosted/rewards/verify": true, "POST /hosted/rewards/bank": true, "POST /hosted/rewards/withdraw": true,
			"POST /hosted/rewards/finish": true,
			// The provider sends the household's browser back: the state is the proof, no token.
			"GET /oauth/callback": true}
		concrete := strings.NewReplacer("{site_id}", siteID, "{asset_id}", assetID, "{external_id}", extID,
			"{subscription_id}", subID, "{provider}", deviceProviderName, "{transaction_id}", withdrawalID, "{id}", flexEventID,
			"{event_id}", dispatchID)

		var wrong []string
		cells, covered := 0, map[string]bool{}
		for _, route := range apiSrv.Routes() {
			name := route.Method + " " + route.Path
			if public[name] {
				continue
			}
			row, ok := rows[name]
			if !ok {
				wrong = append(wrong, name+": no row in the matrix")
				continue
			}
			covered[name] = true
			path := cmp.Or(row.path, concrete.Replace(route.Path)) + row.query
			allowed := http.StatusOK
			if row.success != 0 {
				allowed = row.success
			}
			for caller := range matrixCallers {
				var token string
				want := allowed
				switch caller {
				case callerNoToken:
					want = http.StatusUnauthorized
				case callerMalformed, callerExpired, callerBadSignature, callerAlgNone, callerUnknownKid:
					token, want = bad[caller], http.StatusUnauthorized
				case callerOtherOrg:
					token = tokB
					if row.scoped {
						want = http.StatusNotFound
					}
				case callerOtherSiteUser:
					token, want = tokOther, http.StatusForbidden
					if row.endUser {
						want = http.StatusNotFound
					}
				case callerThisSiteUser:
					token, want = tokUser, http.StatusForbidden
					if row.endUser {
						want = allowed
					}
				case callerLacksRole:
					token, want = noRoles, allowed
					if row.role != "" {
						token, want = lacking[row.role], http.StatusForbidden
					}
				}
				if row.hosted {
					switch caller {
					case callerOtherOrg, callerLacksRole: // organisation tokens, with every role or none
						want = http.StatusForbidden
					case callerOtherSiteUser:
						want = cmp.Or(row.otherUser, allowed)
					case callerThisSiteUser:
						want = allowed
					}
				}
				status, resp := hostedCall(row.hosted, route.Method, path, token, row.body(caller))
				cells++
				cell := fmt.Sprintf("%s × %s", name, caller)
				if status != want {
					wrong = append(wrong, fmt.Sprintf("%s: %d, want %d: %s", cell, status, want, resp))
				}
				if caller == callerOtherOrg && status == http.StatusForbidden && !row.hosted {
					wrong = append(wrong, cell+": 403 tells another organisation that the object exists")
				}
				if caller <= callerOtherSiteUser { // nobody of organisation A's own
					for _, secret := range secretsOfA {
						if caller == callerOtherSiteUser && row.hosted && secret == otherUserSiteID {
							continue // the hosted flow answers V about V's own site
						}
						if strings.Contains(string(resp), secret) {
							wrong = append(wrong, fmt.Sprintf("%s: the answer reveals %q of organisation A: %s", cell, secret, resp))
						}
					}
				}
			}
		}
		Expect(covered).To(HaveLen(len(rows)), "rows for routes the REST API does not serve")
		Expect(wrong).To(BeEmpty())
		Expect(cells).To(Equal(len(rows) * int(matrixCallers)))
		AddReportEntry("authorisation matrix cells", cells)
		GinkgoWriter.Printf("authorisation matrix: %d routes x %d callers = %d cells\n", len(rows), matrixCallers, cells)

		// Organisation A still has its three sites (no caller of the matrix may remove or add
		// one), and organisation B's writes stayed in B.
		Expect(sitesIn(ctx, a.Namespace)).To(HaveLen(3))
		// No caller of the matrix may change or delete organisation A's asset either.
		asset := mustCall("GET", "/entities/asset/"+assetID, tokA, nil)
		Expect(asset["properties"]).To(Equal(map[string]any{"power_kw": 7.4}))
		Expect(sitesIn(ctx, b.Namespace)).NotTo(BeEmpty())
	})
})

// hostedCall is call, sending a hosted-flow route the header that names the origin the
// matrix's component tokens allow (componentForm's).
func hostedCall(hosted bool, method, path, token string, body any) (int, response) {
	if !hosted {
		return call(method, path, token, body)
	}
	status, data, err := testenv.CallWithHeaders(apiServer.URL, method, path, token, body,
		map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return status, data
}

// A bearer token is a string: the REST API must accept the string it issued and no other. A JWS
// in compact form is unpadded base64url (RFC 7515), and the last character of an Ed25519
// signature's 86 carries 4 bits of padding: decoded leniently (the parser is not built with
// jwt.WithStrictDecoding), up to 16 different strings verify as the same token. Low severity,
// but any defence keyed on the token string (a deny list, a replay cache, log correlation) is
// sidestepped by re-spelling the token.
var _ = Describe("Token strings", func() {
	It("accepts only the exact token string it issued", func(ctx SpecContext) {
		tok := newOrg(ctx).token()
		Expect(authRequest(Default, "GET", "/auth/users/me/", []string{"Bearer " + tok}, nil).status).To(Equal(http.StatusOK))
		const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		respelt := tok[:len(tok)-1] + string(alphabet[strings.IndexByte(alphabet, tok[len(tok)-1])^1])
		Expect(respelt).NotTo(Equal(tok))
		expectUnauthorized(authRequest(Default, "GET", "/auth/users/me/", []string{"Bearer " + respelt}, nil))
	})
})

// flexEventBody is a valid POST /flex-events body: an hour from tomorrow's half-hour (an event
// starts at most 7 days before it is declared).
var flexEventBody = func() map[string]any {
	start := time.Now().UTC().Truncate(30 * time.Minute).Add(24 * time.Hour)
	return map[string]any{"proposition": "limited_pause", "start_at": start.Format(time.RFC3339),
		"end_at": start.Add(time.Hour).Format(time.RFC3339), "direction": "turn_down", "rate_pence_per_kwh": 25}
}()

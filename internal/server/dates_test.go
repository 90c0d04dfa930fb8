package server_test

import (
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/hostedflow"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/testenv"
)

// Dates and times out of the supported range (issue 47, docs/api.md "Dates and times"): year
// 0 was a 500 (PostgreSQL has no year 0), year 1 or 1899 was stored. Every date and time a
// door takes is judged by one rule, 1900-01-01 to 9999-12-31: a 422 at the field, never a 500.
var _ = Describe("Dates and times out of the supported range", func() {
	var (
		o       org
		tok     string
		userTok string
		siteID  string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards, flexv1.RoleComponents,
			flexv1.RoleRewardsWrite, flexv1.RolePricesWrite, flexv1.RoleFlexEventsWrite)
		tok = o.token()
		siteID = onboardedSite(tok, "1200000000011")
		user := mustCall("POST", "/auth/component-token", tok, componentForm("dates-user",
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		userTok = user["access_token"].(string)
	})

	It("refuses a date or a time before 1900 or after 9999 at the field, through every door, never a 500", func(ctx SpecContext) {
		By("a price day in the path")
		for _, bad := range []struct{ date, typ string }{
			{"0000-01-01", "date_from_datetime_parsing"}, {"0001-01-01", "greater_than_equal"},
			{"1899-12-31", "greater_than_equal"}, {"10000-01-01", "date_from_datetime_parsing"},
			{"-infinity", "date_from_datetime_parsing"}, {"infinity", "date_from_datetime_parsing"},
			{"epoch", "date_from_datetime_parsing"}, {"today", "date_from_datetime_parsing"},
		} {
			status, resp := call("GET", "/market-prices/price_curve/"+bad.date, tok, nil)
			expectValidationItem(status, resp, []any{"path", "date"}, bad.typ)
			status, resp = call("PUT", "/market-prices/price_curve/"+bad.date, tok, dayPrices(Default, "2027-01-12", 48, pence))
			expectValidationItem(status, resp, []any{"path", "date"}, bad.typ)
		}
		for _, date := range []string{"1900-01-01", "9999-12-31"} {
			status, resp := call("GET", "/market-prices/price_curve/"+date, tok, nil)
			Expect(status).To(Equal(http.StatusNotFound), "%s: %s", date, resp)
		}

		By("the transactions' filters and a credit's times and settlement date")
		txPath := "/rewards/" + siteID + "/transactions"
		for _, bad := range []struct{ query, key, typ string }{
			{"since=0001-01-01T00:00:00Z", "since", "greater_than_equal"},
			{"until=1899-12-31T23:59:59Z", "until", "greater_than_equal"},
			{"since=0000-01-01T00:00:00Z", "since", "datetime_parsing"},
			{"until=9999-12-31T23:59:59-01:00", "until", "datetime_parsing"},
			{"since=-infinity", "since", "datetime_parsing"},
			{"until=infinity", "until", "datetime_parsing"},
		} {
			status, resp := call("GET", txPath+"?"+bad.query, tok, nil)
			expectValidationItem(status, resp, []any{"query", bad.key}, bad.typ)
		}
		Expect(mustCall("GET", txPath+"?since=1900-01-01T00:00:00Z&until=9999-12-31T23:59:59Z", tok, nil)).
			To(HaveKey("transactions"))
		credit := func(key, value string) map[string]any {
			b := map[string]any{"transaction_id": identity.NewID(), "transaction_type": "flex event", "credit_pence": 35,
				"start_time": "2026-10-06T17:30:00Z", "settlement_date": "2026-10-08"}
			b[key] = value
			return b
		}
		for _, bad := range []struct{ key, value, typ string }{
			{"settlement_date", "0000-01-01", "date_parsing"},
			{"settlement_date", "0001-01-01", "greater_than_equal"},
			{"settlement_date", "1899-12-31", "greater_than_equal"},
			{"settlement_date", "10000-01-01", "date_parsing"},
			{"settlement_date", "infinity", "date_parsing"},
			{"start_time", "0001-01-01T00:00:00Z", "greater_than_equal"},
			{"start_time", "-infinity", "datetime_parsing"},
		} {
			status, resp := call("POST", txPath, tok, credit(bad.key, bad.value))
			expectValidationItem(status, resp, []any{"body", bad.key}, bad.typ)
		}

		By("a consent, an installation date, a flex event and a reading")
		before := snapshot(Default, ctx, o.Namespace)
		status, resp := call("POST", "/entities/site/onboard", tok, household("1012345678903", func(b map[string]any) {
			b["site"].(map[string]any)["gave_boundary_meter_consent_at"] = "1000-01-01T00:00:00Z"
		}))
		expectValidationItem(status, resp, []any{"body", "site", "gave_boundary_meter_consent_at"}, "greater_than_equal")
		status, resp = call("POST", "/entities/site/onboard", tok, household("1012345678903", func(b map[string]any) {
			b["assets"].([]any)[0].(map[string]any)["installation_date"] = "0001-01-01"
		}))
		expectValidationItem(status, resp, []any{"body", "assets", 0.0, "installation_date"}, "greater_than_equal")
		status, resp = call("POST", "/auth/component-token", tok, componentForm("dates-user-2",
			"gave_boundary_meter_consent_at", "1899-12-31T23:00:00Z"))
		expectValidationItem(status, resp, []any{"body", "gave_boundary_meter_consent_at"}, "greater_than_equal")
		status, data, err := testenv.CallWithHeaders(apiServer.URL, "POST", "/hosted/api/assets", userTok,
			map[string]any{"type": "charger", "installation_date": "0001-01-01"},
			map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"})
		Expect(err).NotTo(HaveOccurred())
		expectValidationItem(status, data, []any{"body", "installation_date"}, "greater_than_equal")
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before), "a refused date stores nothing")

		status, resp = call("POST", "/flex-events", tok, map[string]any{"proposition": "limited_pause",
			"start_at": "1000-01-01T17:00:00Z", "end_at": "1000-01-01T18:00:00Z", "direction": "turn_down",
			"rate_pence_per_kwh": 25, "site_ids": []any{siteID}})
		expectValidationItem(status, resp, []any{"body", "start_at"}, "greater_than_equal")

		By("the range's last day and hour are taken, and answered (year 10000 is never written)")
		status, resp = call("PUT", "/market-prices/price_curve/9999-12-31", tok, dayPrices(Default, "9999-12-31", 48, pence))
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		mustCall("GET", "/market-prices/price_curve/9999-12-31", tok, nil)
		status, resp = call("POST", "/flex-events", tok, map[string]any{"proposition": "limited_pause",
			"start_at": "9999-12-31T22:00:00Z", "end_at": "9999-12-31T23:30:00Z", "direction": "turn_down",
			"rate_pence_per_kwh": 25, "site_ids": []any{siteID}})
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		mustCall("GET", "/flex-events/"+resp.Map()["id"].(string), tok, nil)
		mustCall("GET", "/flex-events", tok, nil)
		mustCall("GET", "/entities/site/"+siteID+"/flex-events", tok, nil)

		charger := mustCall("GET", "/entities/asset/external-id/charger-1200000000011", tok, nil)["id"].(string)
		status, resp = call("POST", "/data/readings", tok, map[string]any{"readings": []any{
			reading(charger, "boundary_import_kw", "0001-01-01T00:00:00Z", "0001-01-01T00:30:00Z", 1)}})
		expectValidationItem(status, resp, []any{"body", "readings", 0.0, "start_timestamp"}, "greater_than_equal")
	})
})

package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/testenv"
	admission "github.com/flexsite/flexsite/webhook"
)

// flexREST is the real thing for the flex event routes: envtest with the admission webhooks,
// the controllers (the FlexEvent controller settling), a real PostgreSQL database, and the
// server on them.
type flexREST struct {
	t   *testing.T
	ctx context.Context
	env *testenv.Env
	db  *dbtest.Database
	url string
}

// startFlexREST starts it; opts change the server's configuration (e.g. a cache that lags).
func startFlexREST(t *testing.T, opts ...func(*server.Config)) *flexREST {
	t.Helper()
	if err := dbtest.Available(); err != nil {
		if fail, msg := dbtest.MissingVerdict(err); fail {
			t.Fatal(msg)
		} else {
			t.Skip(msg)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	env, err := testenv.Start(ctx, testenv.WithWebhooks)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	database, err := dbtest.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close(context.Background()) })
	// Its controllers share the process with the suite's (TestServer): names may repeat.
	mgr, err := env.NewManager(func(o *ctrl.Options) { o.Controller.SkipNameValidation = ptr.To(true) })
	if err != nil {
		t.Fatal(err)
	}
	if err := controllers.SetupWithManager(ctx, mgr, controllers.Options{DB: database.Pool}); err != nil {
		t.Fatal(err)
	}
	const keys = "flexsite-system"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keys}}); err != nil {
		t.Fatal(err)
	}
	ring := auth.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), keys, "flexsite-token-keys")
	if err := ring.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	cfg := server.Config{Log: ctrl.Log.WithName("api"), Cache: mgr.GetCache(),
		APIReader: mgr.GetAPIReader(), Client: mgr.GetClient(), Issuer: auth.NewIssuer(ring, time.Now),
		Authenticator: auth.NewAuthenticator(mgr.GetCache(), mgr.GetAPIReader()), HostedNamespace: keys, DB: database.Pool}
	for _, opt := range opts {
		opt(&cfg)
	}
	// The webhooks read what the REST API reads (a suite's lagging cache lags for both).
	if err := admission.Setup(mgr, admission.Options{Cache: cfg.Cache}); err != nil {
		t.Fatal(err)
	}
	srv := server.NewServer(cfg)
	httpSrv := httptest.NewServer(srv)
	t.Cleanup(httpSrv.Close)
	go func() { _ = mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	waitFor(t, 20*time.Second, func() error { return env.WebhookServerUp() })

	return &flexREST{t: t, ctx: ctx, env: env, db: database, url: httpSrv.URL}
}

func (f *flexREST) do(method, path, token string, body any) (int, map[string]any) {
	f.t.Helper()
	status, data, err := testenv.Call(f.url, method, path, token, body)
	if err != nil {
		f.t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	return status, m
}

// org creates an organisation with roles and answers its namespace and a token.
func (f *flexREST) org(roles ...flexv1.Role) (string, string) {
	t := f.t
	t.Helper()
	ns, err := f.env.Namespace(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	user, pw := "client-"+ns, "pw-"+ns
	if err := bootstrap.EnsureOrganisation(f.ctx, f.env.Client, bootstrap.Organisation{Namespace: ns, Username: user,
		Password: pw, Roles: roles}); err != nil {
		t.Fatal(err)
	}
	var tok string
	waitFor(t, 20*time.Second, func() error {
		status, body := f.do("POST", "/auth/token-form", "", testenv.Form{"username": user, "password": pw, "grant_type": "password"})
		if status != http.StatusOK {
			return fmt.Errorf("token: %d %v", status, body)
		}
		tok, _ = body["access_token"].(string)
		return nil
	})
	return ns, tok
}

// The flex event routes against the real thing (flexREST). POST answers 201 and the
// controller settles the event; another organisation's event is 404; REST and kubectl refuse
// the same bad events; the site's flex events answer prod's SiteFlexEventsResponse.
func TestFlexEventRoutes(t *testing.T) {
	f := startFlexREST(t)
	ctx, database, do := f.ctx, f.db, f.do
	orgToken := f.org
	ns, tok := orgToken(flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite)
	_, otherTok := orgToken(flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite)
	_, readOnly := orgToken(flexv1.RoleEntityRead)
	_, entityWriter := orgToken(flexv1.RoleEntityRead, flexv1.RoleEntityWrite)

	status, onboarded := do("POST", "/entities/site/onboard", tok, map[string]any{
		"site": map[string]any{"mpan": "1200000000011", "postcode": "SW1A 1AA",
			"gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"},
		"assets": []any{map[string]any{"external_id": "charger-1", "type": "charger", "asset_model": "zappi",
			"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}}},
		"proposition": "limited_pause",
	})
	if status != http.StatusOK {
		t.Fatalf("onboard: %d %v", status, onboarded)
	}
	siteID := onboarded["site"].(map[string]any)["site_id"].(string)

	// The site's readings: 12 working days of 1.8 and 2.6 kWh in the window's half-hours, and
	// 0.4 and 2.9 kWh during the event (the spec's first worked example: 35 p, −1.100 kWh).
	start := testenv.SettledWorkingDay(time.Now())
	day := func(back int) time.Time {
		return time.Date(start.Year(), start.Month(), start.Day()-back, 17, 30, 0, 0, settlement.London)
	}
	write := func(at time.Time, kwh float64) {
		if _, err := database.Pool.Exec(ctx, `INSERT INTO readings (organisation, site_id, asset_id, label, start_at, end_at, value)
			VALUES ($1, $2, 'meter', 'boundary_import_kw', $3, $4, $5)`, ns, siteID, at, at.Add(30*time.Minute), kwh*2); err != nil {
			t.Fatal(err)
		}
	}
	for back, n := 1, 0; n < 12; back++ {
		if d := day(back); d.Weekday() != time.Saturday && d.Weekday() != time.Sunday {
			write(d, 1.8)
			write(d.Add(30*time.Minute), 2.6)
			n++
		}
	}
	write(start, 0.4)
	write(start.Add(30*time.Minute), 2.9)

	event := map[string]any{"proposition": "limited_pause", "start_at": start.Format(time.RFC3339),
		"end_at": start.Add(time.Hour).Format(time.RFC3339), "direction": "turn_down", "rate_pence_per_kwh": 25,
		"site_ids": []any{siteID}}
	status, created := do("POST", "/flex-events", tok, event)
	if status != http.StatusCreated {
		t.Fatalf("POST /flex-events: %d %v", status, created)
	}
	id, _ := created["id"].(string)
	for k, want := range map[string]any{"status": "pending", "direction": "turn_down", "rate_pence_per_kwh": 25.0,
		"start_at": start.UTC().Format(time.RFC3339), "sites_settled": 0.0, "credit_pence": 0.0,
		"market": "limited_pause"} { // no market declared: the proposition's
		if fmt.Sprint(created[k]) != fmt.Sprint(want) {
			t.Errorf("created %s = %v, want %v (%v)", k, created[k], want, created)
		}
	}
	if status, _ := do("POST", "/flex-events", readOnly, event); status != http.StatusForbidden {
		t.Errorf("POST /flex-events with entity_read only: %d, want 403", status)
	}
	// An event is a cause of credits: entity_write alone does not declare one.
	if status, _ := do("POST", "/flex-events", entityWriter, event); status != http.StatusForbidden {
		t.Errorf("POST /flex-events with entity_write but not flex_events_write: %d, want 403", status)
	}

	// The controller settles it: the event's deadline has passed.
	var got map[string]any
	waitFor(t, 30*time.Second, func() error {
		status, got = do("GET", "/flex-events/"+id, tok, nil)
		if status != http.StatusOK || got["status"] != "settled" {
			return fmt.Errorf("GET /flex-events/%s: %d %v", id, status, got)
		}
		return nil
	})
	if got["sites_settled"] != 1.0 || got["credit_pence"] != 35.0 || got["flex_kwh"] != -1.1 {
		t.Errorf("settled event: %v", got)
	}
	if status, body := do("GET", "/flex-events/"+id, otherTok, nil); status != http.StatusNotFound {
		t.Errorf("another organisation's event: %d %v, want 404", status, body)
	}
	if status, _ := do("GET", "/flex-events/no-such-event", tok, nil); status != http.StatusNotFound {
		t.Errorf("an unknown event: %d, want 404", status)
	}
	if status, list := do("GET", "/flex-events", tok, nil); status != http.StatusOK || len(list["events"].([]any)) != 1 {
		t.Errorf("GET /flex-events: %d %v", status, list)
	}
	if status, list := do("GET", "/flex-events", otherTok, nil); status != http.StatusOK || len(list["events"].([]any)) != 0 {
		t.Errorf("GET /flex-events of another organisation: %d %v", status, list)
	}

	status, site := do("GET", "/entities/site/"+siteID+"/flex-events", tok, nil)
	if status != http.StatusOK {
		t.Fatalf("site flex events: %d %v", status, site)
	}
	events := site["events"].([]any)
	if site["site_id"] != siteID || len(events) != 1 {
		t.Fatalf("site flex events: %v", site)
	}
	ev := events[0].(map[string]any)
	for k, want := range map[string]any{"id": id, "status": "settled", "estimated_gross_revenue_gbp": 0.35,
		"final_gross_revenue_gbp": 0.35, "flex_kwh": -1.1, "credit_pence": 35.0, "reason": nil,
		"start_at": start.UTC().Format(time.RFC3339), "end_at": start.Add(time.Hour).UTC().Format(time.RFC3339)} {
		if fmt.Sprint(ev[k]) != fmt.Sprint(want) {
			t.Errorf("site event %s = %v, want %v", k, ev[k], want)
		}
	}
	if status, _ := do("GET", "/entities/site/"+siteID+"/flex-events", otherTok, nil); status != http.StatusNotFound {
		t.Errorf("another organisation's site: %d, want 404", status)
	}
	var credited int
	if err := database.Pool.QueryRow(ctx, `SELECT count(*) FROM reward_transactions WHERE organisation = $1
		AND site_id = $2 AND transaction_type = 'flex event' AND credit_pence = 35 AND flex_wh = -1100`, ns, siteID).
		Scan(&credited); err != nil || credited != 1 {
		t.Errorf("flex event transactions: %d %v", credited, err)
	}

	// The same bad events, through REST (422) and kubectl (admission): refused alike.
	refusedAlike(t, f, ns, tok, event, start)

	boundedCredit(t, f, ns, tok, start)
}

// boundedCredit is the minting scenario of the money review, with the readings in the
// database already (as sent before readings were bounded): 1e6 kW on the working days before a
// weekday, 0 kW on that day. A rate above the organisation's maximum (1,000 p/kWh by default)
// is refused until the platform raises it on the namespace; the credit is then at most the
// rate × the site's plausible power (its 7.4 kW charger + 50 %: 11.1 kW) × the hour, not 10¹².
func boundedCredit(t *testing.T, f *flexREST, ns, tok string, start time.Time) {
	ctx, env, do := f.ctx, f.env, f.do
	status, onboarded := do("POST", "/entities/site/onboard", tok, map[string]any{
		"site": map[string]any{"mpan": validMPAN(8261), "postcode": "SW1A 1AA",
			"gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"},
		"assets": []any{map[string]any{"external_id": "charger-2", "type": "charger", "asset_model": "zappi",
			"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}}},
		"proposition": "limited_pause",
	})
	if status != http.StatusOK {
		t.Fatalf("onboard: %d %v", status, onboarded)
	}
	siteID := onboarded["site"].(map[string]any)["site_id"].(string)
	write := func(at time.Time, kw float64) {
		if _, err := f.db.Pool.Exec(ctx, `INSERT INTO readings (organisation, site_id, asset_id, label, start_at, end_at, value)
			VALUES ($1, $2, 'meter', 'boundary_import_kw', $3, $4, $5)`, ns, siteID, at, at.Add(30*time.Minute), kw); err != nil {
			t.Fatal(err)
		}
	}
	for back, n := 1, 0; n < 12; back++ {
		d := time.Date(start.Year(), start.Month(), start.Day()-back, 17, 30, 0, 0, settlement.London)
		if d.Weekday() != time.Saturday && d.Weekday() != time.Sunday {
			write(d, 1e6)
			write(d.Add(30*time.Minute), 1e6)
			n++
		}
	}
	write(start, 0)
	write(start.Add(30*time.Minute), 0)

	event := map[string]any{"proposition": "limited_pause", "start_at": start.Format(time.RFC3339),
		"end_at": start.Add(time.Hour).Format(time.RFC3339), "direction": "turn_down", "rate_pence_per_kwh": 2000,
		"site_ids": []any{siteID}}
	status, refusal := do("POST", "/flex-events", tok, event)
	if status != http.StatusUnprocessableEntity ||
		!strings.Contains(fmt.Sprint(refusal["detail"]), "Rate must be at most 1000 pence per kWh, the organisation's maximum") {
		t.Fatalf("a rate above the default maximum: %d %v, want 422", status, refusal)
	}

	// The platform raises the organisation's maximum on its namespace.
	namespace := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, namespace); err != nil {
		t.Fatal(err)
	}
	if namespace.Annotations == nil {
		namespace.Annotations = map[string]string{}
	}
	namespace.Annotations[flexv1.MaxFlexRateAnnotation] = "2500"
	if err := env.Client.Update(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	var id string
	waitFor(t, 20*time.Second, func() error {
		status, created := do("POST", "/flex-events", tok, event)
		if status != http.StatusCreated {
			return fmt.Errorf("a rate within the raised maximum: %d %v", status, created)
		}
		id, _ = created["id"].(string)
		return nil
	})
	// kubectl meets the same bound: 2500.01 is above the raised maximum.
	spec := flexv1.FlexEventSpec{Proposition: flexv1.PropositionLimitedPause, StartAt: metav1.NewTime(start),
		EndAt: metav1.NewTime(start.Add(time.Hour)), Direction: flexv1.FlexTurnDown, RatePencePerKWh: "2500.01"}
	err := env.Client.Create(ctx, &flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "dear-"}, Spec: spec})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.ratePencePerKWh") {
		t.Errorf("kubectl's create above the maximum answered %v, want Invalid on spec.ratePencePerKWh", err)
	}

	// 2,000 p/kWh × 11.1 kW × 1 h = 22,200 p, whatever the readings claim.
	var got map[string]any
	waitFor(t, 30*time.Second, func() error {
		status, got = do("GET", "/flex-events/"+id, tok, nil)
		if status != http.StatusOK || got["status"] != "settled" {
			return fmt.Errorf("GET /flex-events/%s: %d %v", id, status, got)
		}
		return nil
	})
	if got["sites_settled"] != 1.0 || got["credit_pence"] != 22200.0 {
		t.Errorf("the settled credit: %v, want 22200 p", got)
	}
	var balance int64
	if err := f.db.Pool.QueryRow(ctx, `SELECT sum(credit_pence) FROM reward_transactions WHERE organisation = $1 AND site_id = $2`,
		ns, siteID).Scan(&balance); err != nil || balance != 22200 {
		t.Errorf("the site's credits: %d %v, want 22200", balance, err)
	}
}

// refusedAlike posts the same bad events through REST (422 naming the field) and creates them
// through the API server (the admission webhook or the CRD's rules: Invalid).
func refusedAlike(t *testing.T, f *flexREST, ns, tok string, event map[string]any, start time.Time) {
	ctx, env, do := f.ctx, f.env, f.do
	bad := []struct {
		name, field string
		change      func(map[string]any, *flexv1.FlexEventSpec)
	}{
		{"start off the half-hour", "start_at", func(b map[string]any, s *flexv1.FlexEventSpec) {
			b["start_at"] = start.Add(15 * time.Minute).Format(time.RFC3339)
			s.StartAt = metav1.NewTime(start.Add(15 * time.Minute))
		}},
		{"end before start", "end_at", func(b map[string]any, s *flexv1.FlexEventSpec) {
			b["end_at"] = start.Add(-time.Hour).Format(time.RFC3339)
			s.EndAt = metav1.NewTime(start.Add(-time.Hour))
		}},
		{"negative rate", "rate_pence_per_kwh", func(b map[string]any, s *flexv1.FlexEventSpec) {
			b["rate_pence_per_kwh"] = -1
			s.RatePencePerKWh = "-1"
		}},
		{"proposition not offered", "proposition", func(b map[string]any, s *flexv1.FlexEventSpec) {
			b["proposition"] = "price_curve"
			s.Proposition = flexv1.PropositionPriceCurve
		}},
		// Settlement of history is what readings are for: at most 7 days back.
		{"start more than 7 days back", "start_at", func(b map[string]any, s *flexv1.FlexEventSpec) {
			b["start_at"] = start.AddDate(0, 0, -8).Format(time.RFC3339)
			b["end_at"] = start.AddDate(0, 0, -8).Add(time.Hour).Format(time.RFC3339)
			s.StartAt = metav1.NewTime(start.AddDate(0, 0, -8))
			s.EndAt = metav1.NewTime(start.AddDate(0, 0, -8).Add(time.Hour))
		}},
		{"market longer than 64 characters", "market", func(b map[string]any, s *flexv1.FlexEventSpec) {
			b["market"] = strings.Repeat("m", 65)
			s.Market = strings.Repeat("m", 65)
		}},
		// The organisation's maximum (none declared: 1,000 p/kWh).
		{"rate above the organisation's maximum", "rate_pence_per_kwh", func(b map[string]any, s *flexv1.FlexEventSpec) {
			b["rate_pence_per_kwh"] = 999999.99
			s.RatePencePerKWh = "999999.99"
		}},
	}
	// price_curve is not offered here: its Proposition is withdrawn.
	pc := &flexv1.Proposition{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "price-curve"}, pc); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, pc); err != nil {
		t.Fatal(err)
	}
	for _, c := range bad {
		body := map[string]any{}
		for k, v := range event {
			body[k] = v
		}
		spec := flexv1.FlexEventSpec{Proposition: flexv1.PropositionLimitedPause, StartAt: metav1.NewTime(start),
			EndAt: metav1.NewTime(start.Add(time.Hour)), Direction: flexv1.FlexTurnDown, RatePencePerKWh: "25"}
		c.change(body, &spec)
		waitFor(t, 20*time.Second, func() error {
			status, refusal := do("POST", "/flex-events", tok, body)
			if status != http.StatusUnprocessableEntity || !strings.Contains(fmt.Sprint(refusal["detail"]), c.field) {
				return fmt.Errorf("%s: REST answered %d %v, want 422 on %s", c.name, status, refusal, c.field)
			}
			err := env.Client.Create(ctx, &flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "bad-"}, Spec: spec})
			if !apierrors.IsInvalid(err) {
				return fmt.Errorf("%s: kubectl's create answered %v, want Invalid", c.name, err)
			}
			return nil
		})
	}
}

func waitFor(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

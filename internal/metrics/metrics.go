// Package metrics holds Flexsite's own Prometheus metrics (prefix flexsite_), registered on
// controller-runtime's registry so the manager's metrics endpoint serves them beside the
// controller-runtime and client-go ones. Every door (REST API, controllers, webhooks)
// counts through here; none imports another to do so.
//
// Label values are bounded sets named here (outcomes, doors, kinds, reasons), never ids or
// namespaces: one series per household or organisation would grow without end.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// HTTPRequests counts REST API answers by route pattern (not the raw path: ids would
	// make every household a series), method and status code.
	HTTPRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flexsite_http_requests_total",
		Help: "REST API requests answered, by route pattern, method and status code.",
	}, []string{"route", "method", "code"})

	// HTTPDuration is how long the REST API took to answer, by route pattern and method.
	HTTPDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "flexsite_http_request_duration_seconds",
		Help:    "REST API request latency, by route pattern and method.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"route", "method"})
)

// RateLimited counts 429 answers by the limit that gave them.
var RateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "flexsite_rate_limited_total",
	Help: "Requests refused with 429, by limit (per_client, auth_failures, login_failures).",
}, []string{"limit"})

// The meter register's lookups, by organisation (internal/app/meterpoints; the budget is
// internal/meters' Budgets). Organisations are the tenants: a bounded set.
var (
	// MeterLookups counts the lookups answered from the register (within budget).
	MeterLookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flexsite_meter_lookups_total",
		Help: "Meter register lookups (search, by reference, by MPAN, by address) let through, by organisation.",
	}, []string{"organisation"})
	// MeterLookupsRefused counts the lookups refused with 429, by organisation and the budget
	// that was spent (organisation_hour, organisation_day, household_hour).
	MeterLookupsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flexsite_meter_lookups_refused_total",
		Help: "Meter register lookups refused with 429, by organisation and budget (organisation_hour, organisation_day, household_hour).",
	}, []string{"organisation", "budget"})
)

// Outcomes of an onboard or an enrolment request besides the refusal codes the API answers
// (previously_withdrew, proposition_not_offered, prerequisites_not_met, ...).
const (
	OutcomeEnrolled        = "enrolled"
	OutcomeAlreadyEnrolled = "already_enrolled"
	// OutcomeInvalid: refused before any enrolment decision (validation, conflict, not found).
	OutcomeInvalid = "invalid"
	// OutcomeError: the request failed on Flexsite's side (a 5xx).
	OutcomeError = "error"
)

// Business metrics: what households and API clients did, whichever door they came through.
var (
	// Onboards counts POST /entities/site/onboard by outcome.
	Onboards = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flexsite_onboards_total",
		Help: "REST onboard requests, by outcome (enrolled, already_enrolled, a refusal code, invalid, error).",
	}, []string{"outcome"})

	// Enrolments counts POST /entities/site/{site_id}/enrol by outcome.
	Enrolments = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flexsite_enrolments_total",
		Help: "REST enrol requests, by outcome (enrolled, already_enrolled, a refusal code, invalid, error).",
	}, []string{"outcome"})

	// Withdrawals counts withdrawals recorded in a site's enrolment history, by the door that
	// recorded them: counted where the record is written, so a REST unenrol (which records,
	// then deletes the Enrolment) is not counted again by the Enrolment's finalizer.
	Withdrawals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flexsite_withdrawals_total",
		Help: "Withdrawals recorded in a site's enrolment history, by door (rest_unenrol, enrolment_deleted).",
	}, []string{"door"})

	// EligibilityChanges counts the Site controller's EligibilityChanged events.
	EligibilityChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "flexsite_eligibility_changes_total",
		Help: "Times the Site controller found a site's eligible propositions changed (its EligibilityChanged event).",
	})

	// KeptRewardPageBytes is the memory the REST API's kept transactions pages and balances
	// are counted for (bounded; see internal/app/rewards' pagecache.go).
	KeptRewardPageBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "flexsite_rewards_kept_page_bytes",
		Help: "Bytes of encoded GET /rewards/{site_id}/transactions pages and balances the REST API keeps " +
			"until PostgreSQL notifies their site's ledger changed (bounded).",
	})

	// KeptEligibilityBytes is the memory the REST API's kept eligibility answers are counted
	// for (bounded; see internal/app/keptanswer).
	KeptEligibilityBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "flexsite_eligibility_kept_answer_bytes",
		Help: "Bytes of encoded GET /entities/site/{site_id}/eligibility answers the REST API keeps " +
			"while their site, its assets and the catalogue are unchanged (bounded).",
	})

	// KeptPriceBytes is the memory the kept market prices and encoded price curves are
	// counted for (bounded; see internal/app/pricing's pricecache.go).
	KeptPriceBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "flexsite_pricing_kept_bytes",
		Help: "Bytes of market prices and encoded price curves the REST API keeps until PostgreSQL " +
			"notifies their market's prices were declared (bounded).",
	})

	// TokensIssued counts access tokens issued, by kind.
	TokensIssued = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flexsite_tokens_issued_total",
		Help: "Access tokens issued, by kind (organisation, end_user).",
	}, []string{"kind"})

	// LoginFailures counts refused logins at /auth/token-form, by reason.
	LoginFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flexsite_login_failures_total",
		Help: "Refused organisation logins, by reason (bad_credentials, rate_limited).",
	}, []string{"reason"})
)

// Label values with a fixed meaning.
const (
	DoorRESTUnenrol      = "rest_unenrol"
	DoorEnrolmentDeleted = "enrolment_deleted"

	TokenOrganisation = "organisation"
	TokenEndUser      = "end_user"

	LoginBadCredentials = "bad_credentials"
	LoginRateLimited    = "rate_limited"
)

func init() {
	ctrlmetrics.Registry.MustRegister(HTTPRequests, HTTPDuration, RateLimited,
		Onboards, Enrolments, Withdrawals, EligibilityChanges, KeptRewardPageBytes, KeptEligibilityBytes, KeptPriceBytes,
		TokensIssued, LoginFailures,
		MeterLookups, MeterLookupsRefused)
	// The series whose label values are known up front start at 0, so that rate() and
	// increase() see their first event, and a dashboard shows 0 rather than "no data".
	for _, outcome := range []string{OutcomeEnrolled, OutcomeAlreadyEnrolled} {
		Onboards.WithLabelValues(outcome)
		Enrolments.WithLabelValues(outcome)
	}
	for _, door := range []string{DoorRESTUnenrol, DoorEnrolmentDeleted} {
		Withdrawals.WithLabelValues(door)
	}
	for _, kind := range []string{TokenOrganisation, TokenEndUser} {
		TokensIssued.WithLabelValues(kind)
	}
	for _, reason := range []string{LoginBadCredentials, LoginRateLimited} {
		LoginFailures.WithLabelValues(reason)
	}
	for _, limit := range []string{"per_client", "auth_failures", "login_failures"} {
		RateLimited.WithLabelValues(limit)
	}
}

// Notification metrics (internal/events, the deliverer).
var (
	// NotificationDeliveries counts delivery attempts by event type and outcome.
	NotificationDeliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flexsite_notification_deliveries_total",
		Help: "Notification delivery attempts, by event type and outcome (delivered, failed, given_up, gone, secret_missing).",
	}, []string{"type", labelOutcome})
	// NotificationsPending is the number of deliveries in the outbox still owed to a subscription.
	NotificationsPending = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "flexsite_notifications_pending",
		Help: "Notification deliveries (one per event and subscription that wants it) not yet delivered nor given up.",
	})
	// NotificationOldestPendingAge is the age of the oldest pending event.
	NotificationOldestPendingAge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "flexsite_notification_oldest_pending_age_seconds",
		Help: "Age of the oldest notification event not yet delivered everywhere it is owed (0 when none).",
	})
	// NotificationHorizonHeldAge is the age of the first committed event the delivery horizon
	// holds back: a transaction older than its writer's is still running (docs/operations.md,
	// "Delivery horizon").
	NotificationHorizonHeldAge = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "flexsite_notification_horizon_held_age_seconds",
		Help: "Age of the first committed notification event held back by the delivery horizon " +
			"(a transaction that began before its writer's is still running anywhere in the database; 0 when none).",
	})
)

// labelOutcome is the outcome label of NotificationDeliveries.
const labelOutcome = "outcome"

func init() {
	ctrlmetrics.Registry.MustRegister(NotificationDeliveries, NotificationsPending, NotificationOldestPendingAge,
		NotificationHorizonHeldAge)
}

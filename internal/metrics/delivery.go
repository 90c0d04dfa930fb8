package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Where a notification's time goes between its event being recorded in the outbox and the
// receiver's answer (internal/delivery): the bench reads these before and after a phase to
// split change → delivery into its stages (docs/performance.md, "Delivery").
var (
	// NotificationStage is the duration of each stage of a delivery, by stage (the Stage* constants).
	NotificationStage = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "flexsite_notification_stage_seconds",
		Help: "Duration of each stage of a notification delivery: event recorded -> fanned out, -> claimed " +
			"(includes waiting for the commit horizon), claimed -> a worker starts it, signing, the POST (dial, TLS, receiver), " +
			"recording the outcome, and event recorded -> receiver answered; and each claim statement (claim).",
		// 0.5 ms to about 33 s: a pass of milliseconds and retries of seconds both land in a bucket of their own.
		Buckets: prometheus.ExponentialBuckets(0.0005, 1.5, 28),
	}, []string{"stage"})
	// NotificationConnections counts the connections the deliverer's POSTs went over, by whether
	// an idle one was reused (a new one costs a dial and a TLS handshake).
	NotificationConnections = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flexsite_notification_connections_total",
		Help: "Connections notification POSTs went over, by whether an idle connection was reused.",
	}, []string{"reused"})
)

// The stages of NotificationStage.
const (
	StageFannedOut = "fanned_out"
	StageClaimed   = "claimed"
	// StageClaim is one claim statement's duration (observed once per claim, not per delivery).
	StageClaim      = "claim"
	StageWorkerWait = "worker_wait"
	StageSign       = "sign"
	StagePost       = "post"
	// StageRecord is one record transaction's duration (observed once per batch).
	StageRecord    = "record"
	StageDelivered = "delivered"
)

func init() {
	ctrlmetrics.Registry.MustRegister(NotificationStage, NotificationConnections)
	for _, s := range []string{StageFannedOut, StageClaimed, StageClaim, StageWorkerWait, StageSign, StagePost, StageRecord, StageDelivered} {
		NotificationStage.WithLabelValues(s)
	}
	NotificationConnections.WithLabelValues("true")
	NotificationConnections.WithLabelValues("false")
}

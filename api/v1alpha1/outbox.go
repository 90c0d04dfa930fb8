package v1alpha1

// The kinds with a notification outbox (status.pendingEvents) expose it the same way, so one
// deliverer drains every outbox.

// GetPendingEvents returns the Site's outbox.
func (s *Site) GetPendingEvents() []PendingEvent { return s.Status.PendingEvents }

// SetPendingEvents replaces the Site's outbox.
func (s *Site) SetPendingEvents(e []PendingEvent) { s.Status.PendingEvents = e }

// GetPendingEvents returns the Asset's outbox.
func (a *Asset) GetPendingEvents() []PendingEvent { return a.Status.PendingEvents }

// SetPendingEvents replaces the Asset's outbox.
func (a *Asset) SetPendingEvents(e []PendingEvent) { a.Status.PendingEvents = e }

// GetPendingEvents returns the Enrolment's outbox.
func (e *Enrolment) GetPendingEvents() []PendingEvent { return e.Status.PendingEvents }

// SetPendingEvents replaces the Enrolment's outbox.
func (e *Enrolment) SetPendingEvents(p []PendingEvent) { e.Status.PendingEvents = p }

// GetPendingEvents returns the RewardLedger's outbox.
func (l *RewardLedger) GetPendingEvents() []PendingEvent { return l.Status.PendingEvents }

// SetPendingEvents replaces the RewardLedger's outbox.
func (l *RewardLedger) SetPendingEvents(p []PendingEvent) { l.Status.PendingEvents = p }

// GetPendingEvents returns the Subscription's outbox (pings).
func (s *Subscription) GetPendingEvents() []PendingEvent { return s.Status.PendingEvents }

// SetPendingEvents replaces the Subscription's outbox.
func (s *Subscription) SetPendingEvents(p []PendingEvent) { s.Status.PendingEvents = p }

// FinalEventRecordedCondition, on a Site being deleted, says its last notification
// (site.offboarded) is in its outbox; the site keeps its finalizer until the outbox is
// delivered.
const FinalEventRecordedCondition = "FinalEventRecorded"

// Reasons of the notification outbox and of a Subscription's conditions.
const (
	// ReasonNotificationsPending: the object waits for its notifications to be delivered.
	ReasonNotificationsPending = "NotificationsPending"
	// ReasonDelivering: the subscription's last delivery succeeded, or none was due.
	ReasonDelivering = "Delivering"
	// ReasonDeliveryFailing: the subscription's deliveries fail and are retried.
	ReasonDeliveryFailing = "DeliveryFailing"
	// ReasonPaused: the subscription is paused (by spec, or by its receiver's 410 Gone).
	ReasonPaused = "Paused"
	// ReasonSecretMissing: the subscription's signing secret cannot be read.
	ReasonSecretMissing = "SecretMissing"
)

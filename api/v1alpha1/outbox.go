package v1alpha1

// Reasons of a Subscription's conditions.
const (
	// ReasonDelivering: the subscription's last delivery succeeded, or none was due.
	ReasonDelivering = "Delivering"
	// ReasonDeliveryFailing: the subscription's deliveries fail and are retried.
	ReasonDeliveryFailing = "DeliveryFailing"
	// ReasonPaused: the subscription is paused (by spec, or by its receiver's 410 Gone).
	ReasonPaused = "Paused"
	// ReasonSecretMissing: the subscription's signing secret cannot be read.
	ReasonSecretMissing = "SecretMissing"
)

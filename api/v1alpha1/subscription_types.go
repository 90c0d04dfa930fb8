package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EventType names a notification event, exactly as the webhook body's `type` spells it.
// +kubebuilder:validation:Enum="site.eligibility_changed";"enrolment.changed";"asset.changed";"site.offboarded";"rewards.transaction_credited";"dispatch.requested";"dispatch.cancelled";"ping"
type EventType string

// The event types (docs/notifications.md, "What arrives").
const (
	EventSiteEligibilityChanged     EventType = "site.eligibility_changed"
	EventEnrolmentChanged           EventType = "enrolment.changed"
	EventAssetChanged               EventType = "asset.changed"
	EventSiteOffboarded             EventType = "site.offboarded"
	EventRewardsTransactionCredited EventType = "rewards.transaction_credited"
	EventDispatchRequested          EventType = "dispatch.requested"
	EventDispatchCancelled          EventType = "dispatch.cancelled"
	EventPing                       EventType = "ping"
)

// AllEventTypes lists every event type a subscription may ask for.
var AllEventTypes = []EventType{EventSiteEligibilityChanged, EventEnrolmentChanged, EventAssetChanged,
	EventSiteOffboarded, EventRewardsTransactionCredited, EventDispatchRequested, EventDispatchCancelled, EventPing}

// SecretKeyReference names a Secret of the subscription's namespace and a key in it.
type SecretKeyReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// key in the Secret's data holding the signing secret (`whsec_` + base64 of its bytes).
	// Defaults to "secret".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// SubscriptionSpec says where to deliver which events of the organisation, signed with which secret.
type SubscriptionSpec struct {
	// url receives the events by HTTPS POST.
	// +required
	// +kubebuilder:validation:MinLength=9
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https://[^\s]+$`
	URL string `json:"url,omitempty"`

	// events lists the event types delivered; empty means all.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	Events []EventType `json:"events,omitempty"`

	// secretRef names the Secret holding the signing secret. The secret is never copied into
	// this object or its status.
	// +required
	SecretRef SecretKeyReference `json:"secretRef,omitzero"`

	// paused stops delivery; events recorded meanwhile are not kept for this subscription. A
	// receiver answering 410 Gone pauses its subscription.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// openADR makes this an OpenADR 3 subscription, made through the OpenADR door: it receives
	// the document's notification (the object as the door answers it) instead of Flexsite's
	// event body, and only the event types its objects and operations map onto (events then
	// lists exactly those; none: nothing is delivered).
	// +optional
	OpenADR OpenADRSubscription `json:"openADR,omitzero"`
}

// IsOpenADR tells whether the subscription was made through the OpenADR door (its openADR
// form is set: every such form names the API client that made it).
func (s *SubscriptionSpec) IsOpenADR() bool { return s.OpenADR.APIClient != "" }

// OpenADRObject is an object type of the OpenADR 3 document.
// +kubebuilder:validation:Enum=PROGRAM;EVENT;REPORT;SUBSCRIPTION;VEN;RESOURCE
type OpenADRObject string

// OpenADROperation is an operation an OpenADR 3 subscription asks to be notified of.
// +kubebuilder:validation:Enum=READ;CREATE;UPDATE;DELETE
type OpenADROperation string

// The OpenADR objects and operations Flexsite notifies of.
const (
	OpenADRObjectEvent     OpenADRObject    = "EVENT"
	OpenADROperationCreate OpenADROperation = "CREATE"
	OpenADROperationDelete OpenADROperation = "DELETE"
)

// OpenADRSubscription is what an OpenADR 3 subscription says beyond where it is delivered
// (spec.url, its callbackUrl) and its Secret (spec.secretRef, which holds its bearer token
// too): the document's clientName, programID, objects and operations, and the API client that
// made it.
type OpenADRSubscription struct {
	// clientName is the subscription's clientName, as its maker named it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ClientName string `json:"clientName,omitempty"`

	// programID is the program (a proposition's name) it is for.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_-]*$`
	ProgramID string `json:"programID,omitempty"`

	// objects it subscribes to.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=6
	Objects []OpenADRObject `json:"objects,omitempty"`

	// operations it subscribes to.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	Operations []OpenADROperation `json:"operations,omitempty"`

	// apiClient is the API client that made it: a VEN client's subscriptions are its own, and
	// are notified only of the events of the assets its VENs hold.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIClient string `json:"apiClient,omitempty"`

	// bearerTokenKey is the key of secretRef's Secret holding the bearer token sent as
	// `Authorization: Bearer`; absent, none is sent. The token is never copied into this object.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	BearerTokenKey string `json:"bearerTokenKey,omitempty"`
}

// OpenADREventTypes are the event types an OpenADR subscription's objects and operations map
// onto: EVENT CREATE is dispatch.requested, EVENT DELETE dispatch.cancelled.
func (o *OpenADRSubscription) OpenADREventTypes() []EventType {
	var out []EventType
	if o == nil {
		return out
	}
	for _, obj := range o.Objects {
		if obj != OpenADRObjectEvent {
			continue
		}
		for _, op := range o.Operations {
			switch op {
			case OpenADROperationCreate:
				out = append(out, EventDispatchRequested)
			case OpenADROperationDelete:
				out = append(out, EventDispatchCancelled)
			}
		}
	}
	return out
}

// DeliveryResult is the outcome of one delivery attempt.
type DeliveryResult struct {
	// time the attempt was made.
	// +required
	Time metav1.Time `json:"time,omitzero"`
	// statusCode is the receiver's HTTP status; absent when no answer came (timeout,
	// connection refused, address refused).
	// +optional
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=599
	StatusCode int32 `json:"statusCode,omitempty"`
	// latencyMillis is how long the attempt took.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LatencyMillis int64 `json:"latencyMillis,omitempty"`
}

// DeliveryAttempt is one recent attempt to deliver an event.
type DeliveryAttempt struct {
	// eventID is the event's id (the webhook-id header).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	EventID string `json:"eventID,omitempty"`
	// type of the event.
	// +required
	Type EventType `json:"type,omitempty"`
	// attempt counts the attempts of this event, from 1.
	// +required
	// +kubebuilder:validation:Minimum=1
	Attempt int32 `json:"attempt,omitempty"`
	// time the attempt was made.
	// +required
	Time metav1.Time `json:"time,omitzero"`
	// statusCode is the receiver's HTTP status; absent when no answer came.
	// +optional
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=599
	StatusCode int32 `json:"statusCode,omitempty"`
	// latencyMillis is how long the attempt took.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LatencyMillis int64 `json:"latencyMillis,omitempty"`
	// error says why the attempt failed; absent on success.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Error string `json:"error,omitempty"`
}

// SubscriptionStatus is the delivery state of a Subscription.
// +kubebuilder:validation:MinProperties=1
type SubscriptionStatus struct {
	// conditions of the subscription (kstatus: Ready, Reconciling, Stalled). Ready=True when
	// the last delivery succeeded or none was due; False with reason DeliveryFailing while
	// deliveries fail, Paused when paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// lastDelivery is the latest attempt's outcome.
	// +optional
	LastDelivery *DeliveryResult `json:"lastDelivery,omitempty"`

	// consecutiveFailures counts the failed attempts since the last success.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`

	// delivered counts the events delivered.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Delivered int64 `json:"delivered,omitempty"`

	// failedAttempts counts the attempts that failed (each is retried until dropped).
	// +optional
	// +kubebuilder:validation:Minimum=0
	FailedAttempts int64 `json:"failedAttempts,omitempty"`

	// dropped counts the events given up after retrying for the retry horizon (24 h).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Dropped int64 `json:"dropped,omitempty"`

	// recentDeliveries are the most recent attempts, newest first (the newest 20).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	RecentDeliveries []DeliveryAttempt `json:"recentDeliveries,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fsub,categories=flexsite
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`
// +kubebuilder:printcolumn:name="Failures",type=integer,JSONPath=`.status.consecutiveFailures`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Subscription asks for the organisation's events to be pushed, signed (Standard Webhooks),
// to an HTTPS URL. Its status is the delivery state.
type Subscription struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says where and what to deliver.
	// +required
	Spec SubscriptionSpec `json:"spec,omitzero"`

	// status is the delivery state.
	// +optional
	Status SubscriptionStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// SubscriptionList contains a list of Subscription.
type SubscriptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Subscription `json:"items"`
}

func init() {
	register(&Subscription{}, &SubscriptionList{})
}

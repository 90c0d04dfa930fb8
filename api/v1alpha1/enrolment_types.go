package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EnrolmentSpec asks for a site to take part in a proposition.
// +kubebuilder:validation:XValidation:rule="self.siteName == oldSelf.siteName",message="siteName is immutable"
// +kubebuilder:validation:XValidation:rule="self.proposition == oldSelf.proposition",message="proposition is immutable"
type EnrolmentSpec struct {
	// siteName is the name of the Site, in the same namespace, to enrol. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SiteName string `json:"siteName,omitempty"`

	// proposition to enrol the site in. Immutable.
	// +required
	Proposition PropositionName `json:"proposition,omitempty"`

	// overrideWithdrawal re-enrols a site that previously withdrew from the proposition.
	// Without it, such an enrolment stays in phase Withdrawn.
	// +optional
	OverrideWithdrawal bool `json:"overrideWithdrawal,omitempty"`
}

// EnrolmentPhase summarises an enrolment's state.
// +kubebuilder:validation:Enum=Pending;Active;NotEligible;Withdrawn
type EnrolmentPhase string

const (
	// EnrolmentPending: the site does not exist (yet), has no assets yet, or its eligibility
	// is not computed from its current spec, assets and catalogue yet. A new Enrolment reads
	// Pending from its creation.
	EnrolmentPending EnrolmentPhase = "Pending"
	// EnrolmentActive: the site is enrolled and eligible.
	EnrolmentActive EnrolmentPhase = "Active"
	// EnrolmentNotEligible: the site is not eligible; status.issues says why. It becomes
	// active by itself once the site turns eligible.
	EnrolmentNotEligible EnrolmentPhase = "NotEligible"
	// EnrolmentWithdrawn: the household withdrew from this proposition before and the
	// enrolment does not override that.
	EnrolmentWithdrawn EnrolmentPhase = "Withdrawn"
)

// EnrolmentStatus is the observed state of an Enrolment.
// +kubebuilder:validation:MinProperties=1
type EnrolmentStatus struct {
	// conditions of the enrolment. Ready=True: the enrolment is active. Stalled=True (and
	// Ready=False with the same reason) when it cannot become active until something changes:
	// NotEligible, PreviouslyWithdrew, PropositionNotOffered, BoundaryMeterConsentRequired.
	// Reconciling=True while it waits for its site (SiteNotFound, SiteDeleting,
	// EligibilityPending).
	// The same three kstatus conditions on every Flexsite kind, each with the
	// observedGeneration it was computed from: Ready=True when the object is in effect as
	// declared (False, with a reason, when not yet or not at all); Reconciling=True while the
	// controller still has work that needs nobody's help; Stalled=True when the object cannot
	// progress until someone changes something. Reconciling and Stalled are never True
	// together, and are removed when they do not hold.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec the status was computed from; -1 until
	// the controller has looked at the object (so kstatus reports a new object InProgress).
	// +optional
	// +kubebuilder:validation:Minimum=-1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase summarises the enrolment's state.
	// +optional
	Phase EnrolmentPhase `json:"phase,omitempty"`

	// issues are the eligibility issue codes of the site's assets when it is not eligible.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	Issues []EligibilityIssue `json:"issues,omitempty"`

	// enrolledAt is when the enrolment first became active. Deleting an enrolment that was
	// ever active records a withdrawal on the Site.
	// +optional
	EnrolledAt *metav1.Time `json:"enrolledAt,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:selectablefield:JSONPath=`.spec.siteName`
// +kubebuilder:resource:shortName=fenrol,categories=flexsite
// +kubebuilder:printcolumn:name="Site",type=string,JSONPath=`.spec.siteName`
// +kubebuilder:printcolumn:name="Proposition",type=string,JSONPath=`.spec.proposition`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Enrolment enrols a Site in a flexibility proposition. Deleting it unenrols the site and is
// remembered as a withdrawal on the Site.
type Enrolment struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the site and the proposition.
	// +required
	Spec EnrolmentSpec `json:"spec,omitzero"`

	// status is the observed state of the enrolment: phase Pending until the controller has
	// a verdict on the site to publish with its reasons.
	// +optional
	// +default={"observedGeneration": -1, "phase": "Pending"}
	// The status is atomic for server-side apply: its writers replace it whole (merge patches
	// of what they computed), and its managed fields name it once rather than each of its fields
	// (docs/scale.md, etcd per household).
	// +structType=atomic
	Status EnrolmentStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// EnrolmentList contains a list of Enrolment.
type EnrolmentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Enrolment `json:"items"`
}

func init() {
	register(&Enrolment{}, &EnrolmentList{})
}

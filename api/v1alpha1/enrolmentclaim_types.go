package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EnrolmentClaimSpec names the Enrolment that holds a site's enrolment in a proposition.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="an EnrolmentClaim is immutable: delete it and claim again"
type EnrolmentClaimSpec struct {
	// enrolmentName is the Enrolment, in the same namespace, that holds the site's enrolment in
	// the proposition; the claim's name is the one the API derives for that enrolment
	// (<site>.<proposition>), whatever the Enrolment's own name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	EnrolmentName string `json:"enrolmentName,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=eclaim,categories=flexsite
// +kubebuilder:printcolumn:name="Enrolment",type=string,JSONPath=`.spec.enrolmentName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// EnrolmentClaim reserves a site's enrolment in a proposition for one Enrolment: a site has at
// most one enrolment per proposition, whatever door it comes through (the REST API names its
// enrolment after the site and the proposition; kubectl and GitOps name theirs as they like).
// The Enrolment admission webhook makes it before the Enrolment is stored, named after the
// site and the proposition: two enrolments of one site in one proposition, made at the same
// moment through any doors, race for one object name, so exactly one wins. The Enrolment's
// finalizer deletes it; one whose Enrolment was never stored, or is gone, is stale and the
// next enrolment of the site in the proposition replaces it.
type EnrolmentClaim struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the enrolment that holds the claim.
	// +required
	Spec EnrolmentClaimSpec `json:"spec,omitzero"`
}

// +kubebuilder:object:root=true

// EnrolmentClaimList contains a list of EnrolmentClaim.
type EnrolmentClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EnrolmentClaim `json:"items"`
}

func init() {
	register(&EnrolmentClaim{}, &EnrolmentClaimList{})
}

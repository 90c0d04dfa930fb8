package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MPANClaimSpec names the Site that holds a meter point.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="an MPANClaim is immutable: delete it and claim again"
type MPANClaimSpec struct {
	// mpan is the 13-digit meter point the claim holds; the claim's name is mpan-<mpan>.
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9]{13}$`
	// +kubebuilder:validation:MinLength=13
	// +kubebuilder:validation:MaxLength=13
	MPAN string `json:"mpan,omitempty"`

	// siteName is the Site, in the same namespace, that holds the meter point.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SiteName string `json:"siteName,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:selectablefield:JSONPath=`.spec.siteName`
// +kubebuilder:resource:shortName=fclaim,categories=flexsite
// +kubebuilder:printcolumn:name="MPAN",type=string,JSONPath=`.spec.mpan`
// +kubebuilder:printcolumn:name="Site",type=string,JSONPath=`.spec.siteName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// MPANClaim reserves a meter point for a Site whose name does not already reserve it. A Site
// created as mpan-<MPAN> holds its MPAN by its name: the API server refuses a second object of
// that name. A Site that comes to hold another MPAN later (PATCH /entities/site with a new
// mpan) keeps its name and id, and holds the new MPAN through an MPANClaim named mpan-<MPAN>:
// two sites racing for one meter point race for one object name, so exactly one wins. The
// Site's finalizer deletes its claims; the Site controller deletes a claim its site no longer
// needs.
type MPANClaim struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the meter point and its site.
	// +required
	Spec MPANClaimSpec `json:"spec,omitzero"`
}

// +kubebuilder:object:root=true

// MPANClaimList contains a list of MPANClaim.
type MPANClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MPANClaim `json:"items"`
}

func init() {
	register(&MPANClaim{}, &MPANClaimList{})
}

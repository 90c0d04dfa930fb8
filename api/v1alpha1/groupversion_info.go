// Package v1alpha1 contains the Flexsite API: households (Site), their energy assets (Asset),
// their enrolments in flexibility propositions (Enrolment), the eligibility rules as data
// (Proposition, AssetModel), reward ledgers (RewardLedger) and API credentials (APIClient).
//
// An organisation is a namespace: every organisation's Sites, Assets, Enrolments, reward
// ledgers and API clients live in its own namespace.
//
// +kubebuilder:object:generate=true
// +groupName=flexsite.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is group version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "flexsite.io", Version: "v1alpha1"}

	// SchemeBuilder is used to add go types to the GroupVersionKind scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

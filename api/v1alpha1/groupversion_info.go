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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is group version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "flexsite.io", Version: "v1alpha1"}

	// SchemeGroupVersion is GroupVersion under the name the types that kubebuilder create api
	// scaffolds register themselves with (SchemeBuilder.Register).
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder is used to add go types to the GroupVersionKind scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme

	// knownTypes are registered by each kind's file (keeping the api package free of
	// controller-runtime, so clients can import it cheaply).
	knownTypes []runtime.Object
)

func register(objs ...runtime.Object) { knownTypes = append(knownTypes, objs...) }

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UsernameClaimSpec names the API client that holds a username.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a UsernameClaim is immutable: delete it and claim again"
type UsernameClaimSpec struct {
	// username the claim holds; the claim's name is username-<hex SHA-256 of it>.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._@-]+$`
	Username string `json:"username,omitempty"`

	// apiClientNamespace is the namespace (organisation) of the APIClient that holds the username.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	APIClientNamespace string `json:"apiClientNamespace,omitempty"`

	// apiClientName is the name of the APIClient that holds the username.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIClientName string `json:"apiClientName,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Username",type=string,JSONPath=`.spec.username`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.apiClientNamespace`
// +kubebuilder:printcolumn:name="APIClient",type=string,JSONPath=`.spec.apiClientName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// UsernameClaim reserves an API client's username across every organisation. The APIClient
// admission webhook makes it, before the APIClient is stored, and only the manager writes
// these objects: two APIClients wanting one username, in any namespaces and at the same
// moment, race for one object name, so exactly one wins. A claim outlives its API client;
// once stale (its client gone or renamed) the next client that wants the username replaces it.
type UsernameClaim struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the username and the API client that holds it.
	// +required
	Spec UsernameClaimSpec `json:"spec,omitzero"`
}

// +kubebuilder:object:root=true

// UsernameClaimList contains a list of UsernameClaim.
type UsernameClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UsernameClaim `json:"items"`
}

func init() {
	register(&UsernameClaim{}, &UsernameClaimList{})
}

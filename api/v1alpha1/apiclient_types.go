package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Role is a permission an API client holds.
// +kubebuilder:validation:Enum=entity_read;entity_write;rewards;components
type Role string

const (
	RoleEntityRead  Role = "entity_read"
	RoleEntityWrite Role = "entity_write"
	RoleRewards     Role = "rewards"
	RoleComponents  Role = "components"
)

// SecretKeyRef names a key of a Secret in the object's own namespace.
type SecretKeyRef struct {
	// Name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Key within the Secret's data.
	// +optional
	// +kubebuilder:default=password-hash
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// APIClientSpec describes an API client of the organisation (the namespace it lives in).
type APIClientSpec struct {
	// Username the client logs in with at /auth/token-form. Unique across all organisations.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._@-]+$`
	Username string `json:"username"`

	// PasswordHashSecretRef points at the bcrypt hash of the client's password. The password
	// itself is never stored.
	PasswordHashSecretRef SecretKeyRef `json:"passwordHashSecretRef"`

	// Roles the client holds.
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	Roles []Role `json:"roles"`

	// ConsentExempt exempts the client from sending gave_boundary_meter_consent_at on the
	// first component-token call for a new end user.
	// +optional
	ConsentExempt bool `json:"consentExempt,omitempty"`

	// Disabled refuses every login and every token already issued to the client.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=fclient,categories=flexsite
// +kubebuilder:printcolumn:name="Username",type=string,JSONPath=`.spec.username`
// +kubebuilder:printcolumn:name="Roles",type=string,JSONPath=`.spec.roles`
// +kubebuilder:printcolumn:name="Disabled",type=boolean,JSONPath=`.spec.disabled`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// APIClient is a machine user of an organisation that calls the REST API.
type APIClient struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec APIClientSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// APIClientList contains a list of APIClient.
type APIClientList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []APIClient `json:"items"`
}

func init() {
	register(&APIClient{}, &APIClientList{})
}

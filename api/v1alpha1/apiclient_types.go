package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Role is a permission an API client holds.
// +kubebuilder:validation:Enum=entity_read;entity_write;rewards;components;rewards_write;rewards_admin;flex_events_write;prices_write
type Role string

const (
	RoleEntityRead  Role = "entity_read"
	RoleEntityWrite Role = "entity_write"
	RoleRewards     Role = "rewards"
	RoleComponents  Role = "components"
	// RoleRewardsWrite credits a site's rewards (POST /rewards/{site_id}/transactions).
	RoleRewardsWrite Role = "rewards_write"
	// RoleRewardsAdmin moves a withdrawal's payment status on.
	RoleRewardsAdmin Role = "rewards_admin"
	// RoleFlexEventsWrite declares flex events (POST /flex-events): an event is a cause of
	// credits, so it is a role of its own rather than part of entity_write.
	RoleFlexEventsWrite Role = "flex_events_write"
	// RolePricesWrite declares an organisation's half-hourly market prices
	// (PUT /market-prices/{market}/{date}): the prices steer every schedule, so they are a
	// role of their own rather than part of entity_write.
	RolePricesWrite Role = "prices_write"
)

// Roles are every role, in the order the CRD's enum and the tools list them.
var Roles = []Role{RoleEntityRead, RoleEntityWrite, RoleRewards, RoleComponents,
	RoleRewardsWrite, RoleRewardsAdmin, RoleFlexEventsWrite, RolePricesWrite}

// Known tells whether r is one of Roles.
func (r Role) Known() bool {
	for _, k := range Roles {
		if r == k {
			return true
		}
	}
	return false
}

// SecretKeyRef names a key of a Secret in the object's own namespace.
type SecretKeyRef struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// key within the Secret's data.
	// +optional
	// +default="password-hash"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// APIClientSpec describes an API client of the organisation (the namespace it lives in).
type APIClientSpec struct {
	// username the client logs in with at /auth/token-form. Unique across all organisations:
	// the admission webhook refuses a username another APIClient holds, in any namespace (a
	// UsernameClaim records who holds it), and a username two APIClients share anyway logs
	// nobody in.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9._@-]+$`
	Username string `json:"username,omitempty"`

	// passwordHashSecretRef points at the bcrypt hash of the client's password. The password
	// itself is never stored. The Secret must carry the label flexsite.io/credentials: "true":
	// the manager reads no Secret without it.
	// +required
	PasswordHashSecretRef SecretKeyRef `json:"passwordHashSecretRef,omitzero"`

	// roles the client holds. A client with none is refused every call that needs a role:
	// taking every role away suspends a client without deleting it.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	Roles []Role `json:"roles,omitempty"`

	// consentExempt exempts the client from sending gave_boundary_meter_consent_at on the
	// first component-token call for a new end user.
	// +optional
	ConsentExempt bool `json:"consentExempt,omitempty"`

	// rewardsTwoFactor makes the hosted rewards page ask the household for a six-digit code,
	// emailed to the site's address, before bank details can be entered or changed, when the
	// link (GET /rewards/{site_id}/url/balance?enforce_two_factor_auth=) does not say.
	// +optional
	RewardsTwoFactor bool `json:"rewardsTwoFactor,omitempty"`

	// redirectURIs are the URLs the client may name as redirect_uri when it starts a device
	// authorisation (GET /entities/site/{site_id}/oauth/{provider}/initiate): the household's
	// browser is sent back there. Compared after normalisation.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=8
	// +kubebuilder:validation:items:MaxLength=2048
	RedirectURIs []string `json:"redirectURIs,omitempty"`

	// redirectSchemes are the private-use URI schemes of the organisation's mobile apps
	// (RFC 8252 section 7.1): each a reverse domain name the organisation controls, in lower
	// case, such as com.example.app. A redirect_uri the client names (the rewards link's, a
	// device authorisation's, and each of redirectURIs) may use one of them
	// (com.example.app:/callback) instead of https; a private-use scheme not listed here is
	// refused. The rule is validation.AppScheme's.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MinLength=3
	// +kubebuilder:validation:items:MaxLength=100
	// +kubebuilder:validation:items:Pattern=`^[a-z]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$`
	RedirectSchemes []string `json:"redirectSchemes,omitempty"`

	// disabled refuses every login and every token already issued to the client.
	// +optional
	Disabled bool `json:"disabled,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:selectablefield:JSONPath=`.spec.username`
// +kubebuilder:resource:shortName=fclient,categories=flexsite
// +kubebuilder:printcolumn:name="Username",type=string,JSONPath=`.spec.username`
// +kubebuilder:printcolumn:name="Roles",type=string,JSONPath=`.spec.roles`
// +kubebuilder:printcolumn:name="Disabled",type=boolean,JSONPath=`.spec.disabled`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// APIClient is a machine user of an organisation that calls the REST API.
type APIClient struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the API client.
	// +required
	Spec APIClientSpec `json:"spec,omitzero"`
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

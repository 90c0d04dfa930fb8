package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeviceProviderSpec describes a maker's cloud that controls devices through OAuth 2.0.
type DeviceProviderSpec struct {
	// displayName is the provider's name as a household reads it ("myenergi").
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	DisplayName string `json:"displayName,omitempty"`

	// authorizationURL is the provider's OAuth 2.0 authorisation endpoint. https, or http to a
	// loopback host when the manager's allow-list permits loopback (make run).
	// +required
	// +kubebuilder:validation:MinLength=8
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	AuthorizationURL string `json:"authorizationURL,omitempty"`

	// tokenURL is the provider's OAuth 2.0 token endpoint.
	// +required
	// +kubebuilder:validation:MinLength=8
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	TokenURL string `json:"tokenURL,omitempty"`

	// revocationURL is the provider's RFC 7009 revocation endpoint, when it has one.
	// +optional
	// +kubebuilder:validation:MinLength=8
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://`
	RevocationURL string `json:"revocationURL,omitempty"`

	// scopes asked for at authorisation.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Scopes []string `json:"scopes,omitempty"`

	// clientID is Flexsite's client id at the provider.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	ClientID string `json:"clientID,omitempty"`

	// clientSecretRef names the Secret, in the manager's namespace, and its key holding the
	// client secret (key default "client-secret"). Without it the client is public (PKCE only).
	// +optional
	ClientSecretRef ProviderSecretRef `json:"clientSecretRef,omitzero"`

	// assetTypes the provider's cloud controls.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	AssetTypes []AssetType `json:"assetTypes,omitempty"`
}

// ProviderSecretRef names a key of a Secret in the manager's namespace.
type ProviderSecretRef struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// key within the Secret's data.
	// +optional
	// +default="client-secret"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=fprovider,categories=flexsite
// +kubebuilder:printcolumn:name="Display name",type=string,JSONPath=`.spec.displayName`
// +kubebuilder:printcolumn:name="Client ID",type=string,JSONPath=`.spec.clientID`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// DeviceProvider is a maker's cloud (myenergi, givenergy, ...) through which a household
// authorises Flexsite to control its devices. Cluster-scoped: declared by the platform team.
// The object's name is the provider's name as the REST API spells it.
type DeviceProvider struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the provider.
	// +required
	Spec DeviceProviderSpec `json:"spec,omitzero"`
}

// +kubebuilder:object:root=true

// DeviceProviderList contains a list of DeviceProvider.
type DeviceProviderList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeviceProvider `json:"items"`
}

// ConnectionPhase is where a device connection stands.
// +kubebuilder:validation:Enum=Pending;Connected;NeedsReauthorisation;Revoked
type ConnectionPhase string

const (
	// ConnectionPending: authorisation started, no token stored yet.
	ConnectionPending ConnectionPhase = "Pending"
	// ConnectionConnected: a usable token is stored and kept alive.
	ConnectionConnected ConnectionPhase = "Connected"
	// ConnectionNeedsReauthorisation: the token was refused (invalid_grant) or expired with no
	// way to refresh it; the household must authorise again.
	ConnectionNeedsReauthorisation ConnectionPhase = "NeedsReauthorisation"
	// ConnectionRevoked: the authorisation was revoked.
	ConnectionRevoked ConnectionPhase = "Revoked"
)

// ClientProvider is the provider name of a token the API client holds for its own systems:
// it covers every asset of the site.
const ClientProvider = "client"

// DeviceConnectionSpec names the site and the provider a connection is for.
// +kubebuilder:validation:XValidation:rule="self.siteName == oldSelf.siteName",message="siteName is immutable"
// +kubebuilder:validation:XValidation:rule="self.provider == oldSelf.provider",message="provider is immutable"
type DeviceConnectionSpec struct {
	// siteName is the name of the Site, in the same namespace. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SiteName string `json:"siteName,omitempty"`

	// provider is the name of a DeviceProvider, or "client" for a token the API client holds
	// for its own systems. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Provider string `json:"provider,omitempty"`
}

// DeviceConnectionStatus is the observed state of a DeviceConnection. It never holds a token.
// +kubebuilder:validation:MinProperties=1
type DeviceConnectionStatus struct {
	// conditions of the connection: Ready=True when Connected; Stalled=True when the household must act
	// (NeedsReauthorisation, Revoked); Reconciling while a transient failure is retried.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec the status was computed from.
	// +optional
	// +kubebuilder:validation:Minimum=-1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase of the connection.
	// +optional
	Phase ConnectionPhase `json:"phase,omitempty"`

	// connectedAt is when the household last authorised (or the client last stored a token).
	// +optional
	ConnectedAt *metav1.Time `json:"connectedAt,omitempty"`

	// expiresAt is when the stored access token expires.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// lastRefreshAt is when the access token was last refreshed.
	// +optional
	LastRefreshAt *metav1.Time `json:"lastRefreshAt,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:selectablefield:JSONPath=`.spec.siteName`
// +kubebuilder:resource:shortName=fconn,categories=flexsite
// +kubebuilder:printcolumn:name="Site",type=string,JSONPath=`.spec.siteName`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expiresAt`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// DeviceConnection is a site's authorisation at one provider. Its tokens live only in a
// Secret it owns (named after it), never in the object.
type DeviceConnection struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the site and provider.
	// +required
	Spec DeviceConnectionSpec `json:"spec,omitzero"`

	// status is the observed state of the connection.
	// +optional
	// +default={"observedGeneration": -1}
	Status DeviceConnectionStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// DeviceConnectionList contains a list of DeviceConnection.
type DeviceConnectionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DeviceConnection `json:"items"`
}

// GetConditions returns the DeviceConnection's conditions.
func (c *DeviceConnection) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the DeviceConnection's conditions.
func (c *DeviceConnection) SetConditions(cs []metav1.Condition) { c.Status.Conditions = cs }

// GetObservedGeneration returns the generation the status was computed from.
func (c *DeviceConnection) GetObservedGeneration() int64 { return c.Status.ObservedGeneration }

// SetObservedGeneration records the generation the status was computed from.
func (c *DeviceConnection) SetObservedGeneration(g int64) { c.Status.ObservedGeneration = g }

// Labels and reasons of device connections.
const (
	// OAuthStateLabel, on a connection's token Secret, holds the hash of the state of the
	// authorisation in progress (never the state itself).
	OAuthStateLabel = "flexsite.io/oauth-state"
	// OAuthStateAnnotation, on a DeviceConnection, holds the same hash while its authorisation
	// is in progress: the callback finds the connection by it in the manager's cache
	// (internal/index's OAuthState), so that a state no connection has costs no API-server
	// call. The token Secret's label stays the proof, consumed once.
	OAuthStateAnnotation = "flexsite.io/oauth-state"
	// DeviceConnectionLabel, with the value "true", marks the Secrets holding a connection's
	// tokens.
	DeviceConnectionLabel = "flexsite.io/device-connection"
	// TokensChangedAnnotation, on a DeviceConnection, is when its token Secret last changed
	// outside the controller (the controller does not watch Secrets).
	TokensChangedAnnotation = "flexsite.io/tokens-changed"

	ReasonConnected             = "Connected"
	ReasonAwaitingAuthorisation = "AwaitingAuthorisation"
	ReasonNeedsReauthorisation  = "NeedsReauthorisation"
	ReasonRevoked               = "Revoked"
	ReasonRefreshFailed         = "RefreshFailed"
)

func init() {
	register(&DeviceProvider{}, &DeviceProviderList{}, &DeviceConnection{}, &DeviceConnectionList{})
}

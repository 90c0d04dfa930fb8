package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AssetSpec describes an energy asset at a site.
// +kubebuilder:validation:XValidation:rule="self.siteName == oldSelf.siteName",message="siteName is immutable"
// +kubebuilder:validation:XValidation:rule="self.externalID == oldSelf.externalID",message="externalID is immutable"
// +kubebuilder:validation:XValidation:rule="self.type == oldSelf.type",message="type is immutable: an asset of another type is another asset (delete it and create the new one)"
type AssetSpec struct {
	// siteName is the name of the Site, in the same namespace, where the asset is located.
	// Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SiteName string `json:"siteName,omitempty"`

	// externalID is the API client's (vendor-specific) identifier of the asset, unique within
	// the organisation. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ExternalID string `json:"externalID,omitempty"`

	// type of the asset. Immutable: every door refuses changing it (the REST API answers 409),
	// since eligibility, enrolments and the household's history were judged for this type.
	// +required
	Type AssetType `json:"type,omitempty"`

	// model is the name of an AssetModel in the catalogue (its spec.modelName). Asset-level
	// metering needs a known, CoP11-qualified model.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Model string `json:"model,omitempty"`

	// installationDate is when the asset was installed, YYYY-MM-DD.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	// +kubebuilder:validation:MinLength=10
	// +kubebuilder:validation:MaxLength=10
	InstallationDate string `json:"installationDate,omitempty"`

	// serialNumber of the asset.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	SerialNumber string `json:"serialNumber,omitempty"`

	// powerW is the power rating in watts (the REST API's power_kw, in kW). Whole watts and
	// watt-hours round-trip exactly, where floats would not.
	// +optional
	// +kubebuilder:validation:Minimum=0
	PowerW *int64 `json:"powerW,omitempty"`

	// capacityWh is the storage capacity in watt-hours (the REST API's capacity_kwh, in kWh).
	// +optional
	// +kubebuilder:validation:Minimum=0
	CapacityWh *int64 `json:"capacityWh,omitempty"`

	// customDispatchPowerW is the power, in watts, used for dispatch when it differs from the
	// rating (the REST API's custom_dispatch_power_kw, in kW).
	// +optional
	// +kubebuilder:validation:Minimum=0
	CustomDispatchPowerW *int64 `json:"customDispatchPowerW,omitempty"`
}

// AssetStatus is the observed state of an Asset.
// +kubebuilder:validation:MinProperties=1
type AssetStatus struct {
	// conditions of the asset. Ready=True: the asset is counted in its Site's eligibility;
	// Stalled with reason SiteNotFound when its Site does not exist.
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

	// needsReauthorisation is true when the owner must re-authorise their device connection
	// to keep taking part in events. Device integrations set it through the status subresource.
	// +optional
	NeedsReauthorisation bool `json:"needsReauthorisation,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:selectablefield:JSONPath=`.spec.siteName`
// +kubebuilder:selectablefield:JSONPath=`.spec.externalID`
// +kubebuilder:resource:shortName=fasset,categories=flexsite
// +kubebuilder:printcolumn:name="Site",type=string,JSONPath=`.spec.siteName`
// +kubebuilder:printcolumn:name="External ID",type=string,JSONPath=`.spec.externalID`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Power W",type=integer,JSONPath=`.spec.powerW`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.model`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Asset is an energy asset (EV charger, battery, heat pump, hot water tank, EV...) at a Site.
type Asset struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the asset.
	// +required
	Spec AssetSpec `json:"spec,omitzero"`

	// status is the observed state of the asset.
	// +optional
	// +default={"observedGeneration": -1}
	// The status is atomic for server-side apply: its writers replace it whole (merge patches
	// of what they computed), and its managed fields name it once rather than each of its fields
	// (docs/scale.md, etcd per household).
	// +structType=atomic
	Status AssetStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// AssetList contains a list of Asset.
type AssetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Asset `json:"items"`
}

func init() {
	register(&Asset{}, &AssetList{})
}

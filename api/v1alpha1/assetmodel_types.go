package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AssetModelSpec describes one asset model of the catalogue.
type AssetModelSpec struct {
	// modelName is the name API clients send as asset_model (e.g. "zappi"). Unique in the
	// catalogue; when two AssetModels share it, the one whose object name sorts first wins.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ModelName string `json:"modelName,omitempty"`

	// manufacturer of the model.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Manufacturer string `json:"manufacturer,omitempty"`

	// assetTypes the model is sold as.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	AssetTypes []AssetType `json:"assetTypes,omitempty"`

	// cop11Qualified is true when the model meets the Code of Practice 11 for asset-level
	// metering, so an installed asset of this model qualifies without a half-hourly boundary
	// meter.
	// +optional
	CoP11Qualified bool `json:"cop11Qualified,omitempty"`

	// enrolEligibilityOverrides force a model's eligibility for a proposition either way,
	// whatever the other rules say (reported as asset_model_enrol_eligibility_override when
	// it blocks).
	// +optional
	// +listType=map
	// +listMapKey=proposition
	// +kubebuilder:validation:MaxItems=16
	EnrolEligibilityOverrides []EnrolEligibilityOverride `json:"enrolEligibilityOverrides,omitempty"`

	// provider is the name of the DeviceProvider whose cloud controls assets of this model.
	// An asset is connected through its model's provider.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Provider string `json:"provider,omitempty"`
}

// EnrolEligibilityOverride forces an asset model's eligibility for one proposition.
type EnrolEligibilityOverride struct {
	// proposition overridden.
	// +required
	Proposition PropositionName `json:"proposition,omitempty"`
	// eligible is the forced answer.
	// +required
	Eligible bool `json:"eligible"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=fmodel,categories=flexsite
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.spec.modelName`
// +kubebuilder:printcolumn:name="Manufacturer",type=string,JSONPath=`.spec.manufacturer`
// +kubebuilder:printcolumn:name="CoP11",type=boolean,JSONPath=`.spec.cop11Qualified`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// AssetModel is an entry of the asset-model catalogue that asset-level eligibility uses.
// Cluster-scoped: one catalogue for every organisation.
type AssetModel struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the asset model.
	// +required
	Spec AssetModelSpec `json:"spec,omitzero"`
}

// +kubebuilder:object:root=true

// AssetModelList contains a list of AssetModel.
type AssetModelList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AssetModel `json:"items"`
}

func init() {
	register(&AssetModel{}, &AssetModelList{})
}

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AssetModelSpec describes one asset model of the catalogue.
type AssetModelSpec struct {
	// ModelName is the name API clients send as asset_model (e.g. "zappi"). Unique in the
	// catalogue; when two AssetModels share it, the one whose object name sorts first wins.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ModelName string `json:"modelName"`

	// Manufacturer of the model.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Manufacturer string `json:"manufacturer,omitempty"`

	// AssetTypes the model is sold as.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	AssetTypes []AssetType `json:"assetTypes,omitempty"`

	// CoP11Qualified: the model meets the Code of Practice 11 for asset-level metering, so an
	// installed asset of this model qualifies without a half-hourly boundary meter.
	// +optional
	CoP11Qualified bool `json:"cop11Qualified,omitempty"`

	// EnrolEligibilityOverrides force a model's eligibility for a proposition either way,
	// whatever the other rules say (reported as asset_model_enrol_eligibility_override when
	// it blocks).
	// +optional
	// +listType=map
	// +listMapKey=proposition
	// +kubebuilder:validation:MaxItems=16
	EnrolEligibilityOverrides []EnrolEligibilityOverride `json:"enrolEligibilityOverrides,omitempty"`
}

// EnrolEligibilityOverride forces an asset model's eligibility for one proposition.
type EnrolEligibilityOverride struct {
	// Proposition overridden.
	Proposition PropositionName `json:"proposition"`
	// Eligible is the forced answer.
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
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AssetModelSpec `json:"spec,omitempty"`
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

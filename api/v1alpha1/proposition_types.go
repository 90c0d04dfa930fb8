package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PropositionSpec holds the eligibility rules of one flexibility proposition.
type PropositionSpec struct {
	// proposition is the name the REST API uses. The object's name must be the same with
	// underscores turned into dashes (limited_pause -> limited-pause), so there is one rule set
	// per proposition.
	// +required
	Proposition PropositionName `json:"proposition,omitempty"`

	// description for people.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// requiresBoundaryMeterConsent is true when enrolling needs the household's boundary meter
	// consent.
	// +optional
	RequiresBoundaryMeterConsent bool `json:"requiresBoundaryMeterConsent,omitempty"`

	// boundaryMeterQualifies is true when a half-hourly settled site with boundary meter
	// consent qualifies through its boundary meter, whatever its asset models. Defaults to
	// true; a pointer so that an explicit false is sent and kept.
	// +optional
	// +default=true
	BoundaryMeterQualifies *bool `json:"boundaryMeterQualifies,omitempty"`

	// assetTypes restricts the asset types that take part; empty means every type.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	AssetTypes []AssetType `json:"assetTypes,omitempty"`

	// market is the market whose half-hourly prices (PUT /market-prices/{market}/{date}) steer
	// the schedules of sites enrolled in this proposition. Absent: the proposition's name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9_.-]*$`
	Market string `json:"market,omitempty"`
}

// MarketOrDefault is spec.market, or the proposition's name when it is unset.
func (s *PropositionSpec) MarketOrDefault() string {
	if s.Market != "" {
		return s.Market
	}
	return string(s.Proposition)
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=fprop,categories=flexsite
// +kubebuilder:printcolumn:name="Proposition",type=string,JSONPath=`.spec.proposition`
// +kubebuilder:printcolumn:name="Needs consent",type=boolean,JSONPath=`.spec.requiresBoundaryMeterConsent`
// +kubebuilder:printcolumn:name="Boundary meter qualifies",type=boolean,JSONPath=`.spec.boundaryMeterQualifies`
// +kubebuilder:printcolumn:name="Market",type=string,JSONPath=`.spec.market`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name == self.spec.proposition.replace('_', '-')",message="metadata.name must be spec.proposition with '_' replaced by '-'"

// Proposition holds the eligibility rules of a flexibility proposition as data, so a platform
// team can change them without a release. Cluster-scoped: the rules are the same for every
// organisation. A proposition with no Proposition object is not offered.
type Proposition struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the proposition's rules.
	// +required
	Spec PropositionSpec `json:"spec,omitzero"`
}

// +kubebuilder:object:root=true

// PropositionList contains a list of Proposition.
type PropositionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Proposition `json:"items"`
}

func init() {
	register(&Proposition{}, &PropositionList{})
}

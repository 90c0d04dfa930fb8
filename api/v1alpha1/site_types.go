package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SiteSpec describes a household: its electricity meter point and what it consented to.
// A Site may have no spec yet; an empty one is left out rather than written as {}.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.mpan) || has(self.mpan)",message="mpan cannot be removed once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.externalUserID) || (has(self.externalUserID) && self.externalUserID == oldSelf.externalUserID)",message="externalUserID is immutable once set"
type SiteSpec struct {
	// mpan is the 13-digit core of the site's Meter Point Administration Number (spaces removed).
	// Its last digit is a check digit. It may be empty only for a site created on demand for an
	// end user (component token) whose meter point is not known yet. Once set it may change
	// (a meter exchange, a corrected typo) but not go: a Site whose name is not mpan-<mpan>
	// holds its mpan through an MPANClaim, which the admission webhook requires.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]{13}$`
	// +kubebuilder:validation:MinLength=13
	// +kubebuilder:validation:MaxLength=13
	MPAN string `json:"mpan,omitempty"`

	// postcode is the UK postcode of the site, upper case with one space (e.g. "SW1A 1AA").
	// +optional
	// +kubebuilder:validation:MinLength=6
	// +kubebuilder:validation:MaxLength=8
	// +kubebuilder:validation:Pattern=`^([A-Z]{1,2}[0-9][A-Z0-9]? [0-9][A-Z]{2}|GIR 0AA)$`
	Postcode string `json:"postcode,omitempty"`

	// streetAddress is the street address of the site.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	StreetAddress string `json:"streetAddress,omitempty"`

	// email of the household, used for payments, payment-failure notices and optional
	// two-factor codes.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=254
	Email string `json:"email,omitempty"`

	// boundaryMeterConsentAt is when the household consented to boundary meter readings.
	// +optional
	BoundaryMeterConsentAt *metav1.Time `json:"boundaryMeterConsentAt,omitempty"`

	// halfHourlySettled tells whether the meter point is settled half-hourly. A half-hourly
	// settled site with boundary meter consent qualifies through its boundary meter.
	// +optional
	HalfHourlySettled bool `json:"halfHourlySettled,omitempty"`

	// nonDomestic marks a business site; propositions are for domestic sites only.
	// +optional
	NonDomestic bool `json:"nonDomestic,omitempty"`

	// externalUserID is the API client's identifier of the end user living here, for sites
	// created through the component-token flow. Immutable once set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ExternalUserID string `json:"externalUserID,omitempty"`

	// dispatchMethods the household consented to (legacy onboard).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	DispatchMethods []DispatchMethod `json:"dispatchMethods,omitempty"`

	// markets the site takes part in.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=8
	Markets []Market `json:"markets,omitempty"`

	// tariff of the household.
	// +optional
	Tariff *Tariff `json:"tariff,omitempty"`
}

// DispatchMethod is a way the site may be dispatched.
// +kubebuilder:validation:Enum=cm_infrequent_dispatch;full_asset_schedule_control;limited_pause;vpp_limited_control
type DispatchMethod string

// Market is an energy market the site takes part in.
// +kubebuilder:validation:Enum=cm;dfs;dno;lcm;sffr;wholesale
type Market string

// TariffType is the kind of electricity tariff.
// +kubebuilder:validation:Enum=single_rate;dual_rate;dynamic;smart;unknown
type TariffType string

// Tariff describes the household's electricity tariff.
// +kubebuilder:validation:XValidation:rule="has(self.cheapStartTime) == has(self.cheapEndTime)",message="cheapStartTime and cheapEndTime go together"
type Tariff struct {
	// type of tariff.
	// +optional
	Type TariffType `json:"type,omitempty"`
	// cheapStartTime is the start of the off-peak period, HH:MM or HH:MM:SS.
	// +optional
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?$`
	// +kubebuilder:validation:MinLength=5
	// +kubebuilder:validation:MaxLength=8
	CheapStartTime string `json:"cheapStartTime,omitempty"`
	// cheapEndTime is the end of the off-peak period, HH:MM or HH:MM:SS.
	// +optional
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?$`
	// +kubebuilder:validation:MinLength=5
	// +kubebuilder:validation:MaxLength=8
	CheapEndTime string `json:"cheapEndTime,omitempty"`
}

// SiteProperties are the site-level facts eligibility depends on.
type SiteProperties struct {
	// hasMeterConsent is true when the household consented to boundary meter readings.
	// +required
	HasMeterConsent bool `json:"hasMeterConsent"`
	// isHalfHourlySettled is true when the meter point is settled half-hourly.
	// +required
	IsHalfHourlySettled bool `json:"isHalfHourlySettled"`
}

// PropositionEligibility is one asset's eligibility for one proposition.
type PropositionEligibility struct {
	// proposition evaluated.
	// +required
	Proposition PropositionName `json:"proposition,omitempty"`
	// eligible is true when the asset qualifies for the proposition.
	// +required
	Eligible bool `json:"eligible"`
	// issues explain why the asset does not qualify (empty when eligible).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Issues []EligibilityIssue `json:"issues,omitempty"`
}

// AssetEligibility is one asset's eligibility for every proposition.
type AssetEligibility struct {
	// name of the Asset object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// id is the asset's API identifier (UUID).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=36
	ID string `json:"id,omitempty"`
	// externalID is the API client's identifier of the asset.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	ExternalID string `json:"externalID,omitempty"`
	// propositions lists the asset's eligibility per proposition (none when no proposition
	// is offered).
	// +optional
	// +listType=map
	// +listMapKey=proposition
	// +kubebuilder:validation:MaxItems=16
	Propositions []PropositionEligibility `json:"propositions,omitempty"`
}

// SiteStatus is the observed state of a Site: its eligibility, computed by the controller, and
// the household's enrolment history.
// +kubebuilder:validation:MinProperties=1
type SiteStatus struct {
	// conditions of the site. Ready=True: the site is evaluated (its status reflects its
	// current spec, its assets and the rules). Eligible=True: it can enrol in at least one
	// proposition (domain state: a site eligible for nothing is still Ready).
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
	// the controller has looked at the site (so kstatus reports a new site InProgress).
	// +optional
	// +kubebuilder:validation:Minimum=-1
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// properties are the site-level facts eligibility was computed from (absent when both
	// are false).
	// +optional
	Properties SiteProperties `json:"properties,omitzero"`

	// evaluatedFrom names what the eligibility in this status was computed from besides the
	// spec (observedGeneration): the site's assets and the catalogue. A reader compares it
	// with what its own cache holds to tell whether this status is current: the REST API
	// serves this status rather than evaluating again, and waits for the next one when it is
	// not (docs/architecture.md, "Eligibility").
	// +optional
	EvaluatedFrom EligibilityInputs `json:"evaluatedFrom,omitzero"`

	// eligiblePropositions the site can enrol in: a site is eligible when one of its assets is.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	EligiblePropositions []PropositionName `json:"eligiblePropositions,omitempty"`

	// Atomic, not a map keyed by name: managed fields would name every asset and proposition
	// (~1 KiB of each Site in etcd, docs/scale.md) for a list only the controller writes.

	// assets holds the per-asset, per-proposition eligibility detail, written whole by the
	// controller. It holds as many assets as one onboard may bring (100), so that such a site
	// can be evaluated.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Assets []AssetEligibility `json:"assets,omitempty"`

	// enrolmentHistory lists the household's past enrolments that ended by its withdrawal,
	// oldest first (the newest 32 are kept). A withdrawal binds: a new enrolment in the same
	// proposition needs overrideWithdrawal, and an enrolment made after the withdrawal
	// supersedes it. Current enrolments are the site's Enrolment objects.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	EnrolmentHistory []EnrolmentPeriod `json:"enrolmentHistory,omitempty"`
}

// MaxSiteAssets is how many assets a Site's status.assets holds (its MaxItems marker, which
// must say the same number: internal/validation's TestSiteAssetsBound). The REST API takes at most
// this many assets in one onboard or initialise, so that the status of a site onboarded whole
// can always be written: a status refused by the API server would leave the site's
// eligibility never current, and every read of it waiting.
const MaxSiteAssets = 100

// EligibilityInputs are versions of what a site's eligibility depends on besides its spec,
// each a digest (household.EligibilityInputsOf): equal digests, same inputs.
// +kubebuilder:validation:MinProperties=1
type EligibilityInputs struct {
	// assets is a digest of the site's live Assets: each one's uid, generation and id.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Assets string `json:"assets,omitempty"`
	// catalogue is a digest of the rules the assets' evaluation read: every offered
	// proposition's and those of each asset's model, by content.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Catalogue string `json:"catalogue,omitempty"`
}

// EnrolmentPeriod is one enrolment of the household in a proposition, ended by a withdrawal.
type EnrolmentPeriod struct {
	// proposition the household was enrolled in.
	// +required
	Proposition PropositionName `json:"proposition,omitempty"`
	// enrolmentUID is the metadata.uid of the withdrawn Enrolment, so that its withdrawal is
	// recorded once whichever door recorded it first.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	EnrolmentUID string `json:"enrolmentUID,omitempty"`
	// enrolledAt is when the enrolment became active; absent when it never did (the household
	// withdrew before the site was eligible).
	// +optional
	EnrolledAt *metav1.Time `json:"enrolledAt,omitempty"`
	// withdrawnAt is when the household withdrew.
	// +required
	WithdrawnAt metav1.Time `json:"withdrawnAt,omitzero"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:selectablefield:JSONPath=`.spec.mpan`
// +kubebuilder:selectablefield:JSONPath=`.spec.externalUserID`
// +kubebuilder:resource:shortName=fsite,categories=flexsite
// +kubebuilder:printcolumn:name="MPAN",type=string,JSONPath=`.spec.mpan`
// +kubebuilder:printcolumn:name="Postcode",type=string,JSONPath=`.spec.postcode`
// +kubebuilder:printcolumn:name="Eligible",type=string,JSONPath=`.status.eligiblePropositions`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Site is a household with an electricity meter point (MPAN), registered by an organisation.
// Its status holds the eligibility of the site and each of its assets for every proposition.
type Site struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the household.
	// +optional
	Spec SiteSpec `json:"spec,omitzero"`

	// status is the site's eligibility and enrolment history.
	// +optional
	// +default={"observedGeneration": -1}
	// The status is atomic for server-side apply: its writers replace it whole (merge patches
	// of what they computed), and its managed fields name it once rather than each of its fields
	// (docs/scale.md, etcd per household).
	// +structType=atomic
	Status SiteStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// SiteList contains a list of Site.
type SiteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Site `json:"items"`
}

func init() {
	register(&Site{}, &SiteList{})
}

package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PropositionName names a flexibility proposition exactly as the REST API spells it.
// +kubebuilder:validation:Enum=limited_pause;full_asset_schedule_control;price_curve
type PropositionName string

const (
	PropositionLimitedPause             PropositionName = "limited_pause"
	PropositionFullAssetScheduleControl PropositionName = "full_asset_schedule_control"
	PropositionPriceCurve               PropositionName = "price_curve"
)

// AllPropositions lists every proposition in the order the API reports them.
var AllPropositions = []PropositionName{PropositionLimitedPause, PropositionFullAssetScheduleControl, PropositionPriceCurve}

// AssetType is the kind of an energy asset, spelled verbatim as the REST API does (spaces included).
// +kubebuilder:validation:Enum=charger;battery;"heat pump";electric_vehicle;"hot water tank";"boundary meter";"frequency meter";"pv inverter"
type AssetType string

const (
	AssetTypeCharger         AssetType = "charger"
	AssetTypeBattery         AssetType = "battery"
	AssetTypeHeatPump        AssetType = "heat pump"
	AssetTypeElectricVehicle AssetType = "electric_vehicle"
	AssetTypeHotWaterTank    AssetType = "hot water tank"
	AssetTypeBoundaryMeter   AssetType = "boundary meter"
	AssetTypeFrequencyMeter  AssetType = "frequency meter"
	AssetTypePVInverter      AssetType = "pv inverter"
)

// CreatableAssetTypes are the asset types an API client may register.
var CreatableAssetTypes = []AssetType{AssetTypeCharger, AssetTypeBattery, AssetTypeHeatPump, AssetTypeElectricVehicle, AssetTypeHotWaterTank}

// AllAssetTypes are all asset types an asset record may carry.
var AllAssetTypes = []AssetType{AssetTypeBoundaryMeter, AssetTypeCharger, AssetTypeBattery, AssetTypeHeatPump, AssetTypeHotWaterTank, AssetTypeFrequencyMeter, AssetTypeElectricVehicle, AssetTypePVInverter}

// EligibilityIssue is a code that explains why an asset is not eligible for a proposition.
// +kubebuilder:validation:Enum=asset_model_not_set;asset_model_not_found;asset_model_not_cop11_qualified;asset_installation_date_not_set;asset_model_enrol_eligibility_override;non_domestic_site;asset_type_not_supported
type EligibilityIssue string

const (
	IssueAssetModelNotSet                   EligibilityIssue = "asset_model_not_set"
	IssueAssetModelNotFound                 EligibilityIssue = "asset_model_not_found"
	IssueAssetModelNotCoP11Qualified        EligibilityIssue = "asset_model_not_cop11_qualified"
	IssueInstallationDateNotSet             EligibilityIssue = "asset_installation_date_not_set"
	IssueAssetModelEnrolEligibilityOverride EligibilityIssue = "asset_model_enrol_eligibility_override"
	IssueNonDomesticSite                    EligibilityIssue = "non_domestic_site"
	// IssueAssetTypeNotSupported is Flexsite's own addition: a Proposition may restrict the
	// asset types that take part (spec.assetTypes); the published API has no code for it.
	IssueAssetTypeNotSupported EligibilityIssue = "asset_type_not_supported"
)

// Labels and annotations Flexsite owns.
const (
	// IDLabel carries the stable UUID the REST API hands out for a Site or Asset. It lives in
	// metadata (not status) so that it survives a backup/restore that recreates objects from YAML.
	IDLabel = "flexsite.io/id"
	// InFlightAnnotation marks a Site created by a REST request that writes more objects
	// after it (assets, an enrolment). Its value (JSON, see InFlight) names them and a
	// deadline: the Site controller publishes the site once they all exist, and deletes it if
	// the deadline passes first (the request died half-way).
	InFlightAnnotation = "flexsite.io/in-flight"
	// WithdrawalAnnotationPrefix + proposition records, on a Site, when the household withdrew
	// from that proposition (RFC 3339). Annotations survive backup/restore and are never
	// owned by a GitOps tool that does not declare them.
	WithdrawalAnnotationPrefix = "withdrawal.flexsite.io/"
	// NoWithdrawalAnnotation on an Enrolment being deleted says the deletion is not the
	// household's choice (a failed request undoing what it wrote): its finalizer records no
	// withdrawal.
	NoWithdrawalAnnotation = "flexsite.io/no-withdrawal"
	// OrganisationLabel marks a namespace as a Flexsite organisation.
	OrganisationLabel = "flexsite.io/organisation"
)

// Finalizer guards the cleanup of a Site's children and an Enrolment's withdrawal record.
const Finalizer = "flexsite.io/finalizer"

// Condition types and reasons shared by the kinds.
const (
	// ReadyCondition is the kstatus-compatible summary condition.
	ReadyCondition = "Ready"
	// EligibleCondition on a Site tells whether it is eligible for at least one proposition.
	EligibleCondition = "Eligible"

	ReasonEligibilityComputed = "EligibilityComputed"
	ReasonNotEligible         = "NotEligible"
	ReasonEligible            = "Eligible"
	ReasonNoAssets            = "NoAssets"
	ReasonSiteNotFound        = "SiteNotFound"
	ReasonSiteDeleting        = "SiteDeleting"
	ReasonEnrolled            = "Enrolled"
	ReasonWithdrawn           = "PreviouslyWithdrew"
	ReasonReconciled          = "Reconciled"
	ReasonDeleting            = "Deleting"

	// ProvisionedCondition on a Site created by a REST request tells that everything the
	// request wrote exists (see InFlightAnnotation).
	ProvisionedCondition   = "Provisioned"
	ReasonRequestCompleted = "RequestCompleted"
	ReasonMarkerExpired    = "InFlightMarkerExpired"
)

// InFlight is the value of the InFlightAnnotation.
type InFlight struct {
	// Until is when the request must have finished (RFC 3339).
	Until metav1.Time `json:"until"`
	// Objects the request writes after the site, as "Kind/name" in the site's namespace.
	Objects []string `json:"objects"`
}

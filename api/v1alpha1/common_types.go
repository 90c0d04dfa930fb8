package v1alpha1

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
// +kubebuilder:validation:Enum=asset_model_not_set;asset_model_not_found;asset_model_not_cop11_qualified;asset_installation_date_not_set;asset_model_enrol_eligibility_override;non_domestic_site;asset_type_not_supported;site_details_missing
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
	// IssueSiteDetailsMissing is Flexsite's own addition: a household created on demand for
	// a component token has no MPAN yet, and nothing is eligible until it has one.
	IssueSiteDetailsMissing EligibilityIssue = "site_details_missing"
)

// Labels Flexsite owns.
const (
	// IDLabel carries the stable UUID the REST API hands out for a Site or Asset. It lives in
	// metadata (not status) so that it survives a backup/restore that recreates objects from YAML.
	IDLabel = "flexsite.io/id"
	// OrganisationLabel marks a namespace as a Flexsite organisation.
	OrganisationLabel = "flexsite.io/organisation"
	// CredentialsLabel, with the value "true", marks a Secret that holds an API client's
	// password hash. The manager reads no other Secret of an organisation: a hash Secret
	// without it is not used, and its client cannot log in.
	CredentialsLabel = "flexsite.io/credentials"
)

// Annotations Flexsite owns.
const (
	// UserIDAnnotation holds, on a Site created for an end user (a component token), that
	// user's API id: the token's subject, so that a namesake site recreated after an offboard
	// is not the same user's.
	UserIDAnnotation = "flexsite.io/user-id"
	// AllowedOriginsAnnotation lists, on a household's Site, the web origins its component
	// tokens were issued for (space-separated, newest last). A browser's CORS preflight
	// carries no token, so the API answers it from this list; an actual request is granted
	// CORS only when its verified token names the request's origin.
	AllowedOriginsAnnotation = "flexsite.io/allowed-origins"
	// MeterChangesAnnotation records, on a household's Site, when its household (a component
	// token) last changed the Site's MPAN: Unix seconds, space-separated, oldest first, at most
	// household.MeterChangesPerDay of them. It is the household's budget of meter changes,
	// kept on the Site so that every replica counts the same changes.
	MeterChangesAnnotation = "flexsite.io/meter-changes"
	// InFlightAnnotation holds a Site's in-flight marker: what the request that created the
	// site will write after it, and by when (JSON of household.InFlight).
	InFlightAnnotation = "flexsite.io/in-flight"
	// NoWithdrawalAnnotation on an Enrolment being deleted says the deletion is not the
	// household's choice (a failed request undoing what it wrote), so it records no withdrawal.
	NoWithdrawalAnnotation = "flexsite.io/no-withdrawal"
	// DeclaredClaimAnnotation, with the value "true", marks an MPANClaim the Site controller
	// made for a site declared (kubectl, GitOps) with the MPAN already stored. No request is
	// writing its site, so it has no grace: it binds only while its site holds the MPAN
	// (household.Standing).
	DeclaredClaimAnnotation = "flexsite.io/declared-claim"
	// MaxFlexRateAnnotation, on an organisation's namespace, is the highest rate its flex
	// events may pay, in pence per kWh as a FlexEvent spells a rate ("1000", "1250.5");
	// absent or not a rate: 1,000 p/kWh (validation.DefaultMaxFlexRateCentipence). Raising it
	// is the platform team's decision, not the organisation's API client's.
	MaxFlexRateAnnotation = "flexsite.io/max-flex-rate-pence-per-kwh"
)

// Finalizer guards the cleanup of a Site's children and an Enrolment's withdrawal record.
const Finalizer = "flexsite.io/finalizer"

// DispatchFinalizer, on a FlexEvent that has not ended, makes its deletion cancel its open
// dispatches (dispatch.cancelled to the asset controllers) before the object goes.
const DispatchFinalizer = "flexsite.io/dispatches"

// Condition types. Every Flexsite kind reports the same three kstatus conditions with the same
// meaning, each carrying the observedGeneration it was computed from:
//   - Ready: True when the object is in effect as declared (a Site evaluated, an Asset counted
//     in its Site's eligibility, an Enrolment active); False with a reason otherwise.
//   - Reconciling: True while the controller still has work to do that needs no change from
//     anyone (a first evaluation, a request still writing, a site being deleted).
//   - Stalled: True when the object cannot make progress until someone changes something (an
//     Enrolment whose site is not eligible, that withdrew without override, or whose
//     proposition is not offered). kstatus reports such an object Failed, not InProgress.
//
// Reconciling and Stalled are never True together. Domain state is reported apart from
// them: a Site's eligibility in its Eligible condition, an Enrolment's in status.phase.
const (
	ReadyCondition       = "Ready"
	ReconcilingCondition = "Reconciling"
	StalledCondition     = "Stalled"
	// EligibleCondition on a Site tells whether it is eligible for at least one proposition.
	EligibleCondition = "Eligible"
)

// Condition reasons.
const (
	// ReasonSucceeded: the object is in effect as declared (Ready=True).
	ReasonSucceeded = "Succeeded"
	// ReasonProgressing: the controller is working on the object (Reconciling=True).
	ReasonProgressing = "Progressing"
	// ReasonReconcileFailed: the last reconcile met an error; it is retried with backoff.
	ReasonReconcileFailed = "ReconcileFailed"
	// ReasonProvisioning: the REST request that created the site is still writing its assets
	// and enrolments.
	ReasonProvisioning = "Provisioning"
	// ReasonDeleting: the object is being deleted.
	ReasonDeleting = "Deleting"

	// Site eligibility (the Eligible condition).
	ReasonEligible    = "Eligible"
	ReasonNotEligible = "NotEligible"
	ReasonNoAssets    = "NoAssets"

	// ReasonMPANTaken: another site holds the Site's MPAN (its claim, or its name), or is
	// taking it; the site is not evaluated until it holds its MPAN.
	ReasonMPANTaken = "MPANTaken"

	// Why an Asset or Enrolment is not (yet) in effect.
	ReasonSiteNotFound       = "SiteNotFound"
	ReasonSiteDeleting       = "SiteDeleting"
	ReasonEligibilityPending = "EligibilityPending"

	// Enrolment verdicts (see internal/household.Verdict).
	ReasonEnrolled              = "Enrolled"
	ReasonPreviouslyWithdrew    = "PreviouslyWithdrew"
	ReasonPropositionNotOffered = "PropositionNotOffered"
	ReasonConsentRequired       = "BoundaryMeterConsentRequired"

	// A flex event's settlement (Reconciling=True while it waits).
	ReasonEventNotEnded    = "EventNotEnded"
	ReasonAwaitingReadings = "AwaitingReadings"
)

package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FlexDirection is which way a flex event asks households to move their consumption.
// +kubebuilder:validation:Enum=turn_down;turn_up
type FlexDirection string

const (
	// FlexTurnDown asks for less import than usual: delivered = baseline − actual.
	FlexTurnDown FlexDirection = "turn_down"
	// FlexTurnUp asks for more import than usual: delivered = actual − baseline.
	FlexTurnUp FlexDirection = "turn_up"
)

// FlexSkipReason is why a site of a flex event was not settled.
// +kubebuilder:validation:Enum=insufficient_history;insufficient_readings;transaction_id_taken
type FlexSkipReason string

const (
	// FlexInsufficientHistory: fewer than 5 qualifying days (2 for a weekend event) in the
	// 60 days before the event to form a baseline.
	FlexInsufficientHistory FlexSkipReason = "insufficient_history"
	// FlexInsufficientReadings: the site's readings cover less than 80 % of the event.
	FlexInsufficientReadings FlexSkipReason = "insufficient_readings"
	// FlexTransactionIDTaken: the site's credit was not written, because an API client of the
	// organisation had already used the transaction id its settlement derives for another
	// transaction (never credited twice; the event's other sites are settled).
	FlexTransactionIDTaken FlexSkipReason = "transaction_id_taken"
)

// MarketOrDefault is spec.market, or the proposition when it is unset.
func (s *FlexEventSpec) MarketOrDefault() string {
	if s.Market != "" {
		return s.Market
	}
	return string(s.Proposition)
}

// DefaultFlexEventDeadline is how long after its end an event waits for late sites'
// readings when spec.deadline is not set.
const DefaultFlexEventDeadline = 48 * time.Hour

// FlexEventSpec declares a flex event: a window, a direction and the household's rate, for
// the sites of a proposition. All but the deadline is immutable: settlement reads it, and a
// credit once paid must still match the event that paid it.
// +kubebuilder:validation:XValidation:rule="self.proposition == oldSelf.proposition && self.startAt == oldSelf.startAt && self.endAt == oldSelf.endAt && self.direction == oldSelf.direction && self.ratePencePerKWh == oldSelf.ratePencePerKWh",message="proposition, startAt, endAt, direction and ratePencePerKWh are immutable: delete the event and create another"
// +kubebuilder:validation:XValidation:rule="has(self.siteNames) == has(oldSelf.siteNames) && (!has(self.siteNames) || self.siteNames == oldSelf.siteNames)",message="siteNames is immutable"
// +kubebuilder:validation:XValidation:rule="has(self.market) == has(oldSelf.market) && (!has(self.market) || self.market == oldSelf.market)",message="market is immutable"
// +kubebuilder:validation:XValidation:rule="self.endAt > self.startAt",message="endAt must be after startAt"
// +kubebuilder:validation:XValidation:rule="self.endAt - self.startAt <= duration('24h')",message="a flex event must last at most 24 hours"
// +kubebuilder:validation:XValidation:rule="!has(self.deadline) || self.deadline >= self.endAt",message="deadline must not be before endAt"
type FlexEventSpec struct {
	// proposition whose sites the event is for: by default every site with an active
	// enrolment in it at startAt. A Proposition object of that name must exist (admission
	// refuses an event for a proposition that is not offered).
	// +required
	Proposition PropositionName `json:"proposition,omitempty"`

	// startAt is when the event starts, on a half-hour boundary (hh:00:00 or hh:30:00; UK
	// local half-hours are UTC half-hours too).
	// +required
	// +kubebuilder:validation:XValidation:rule="self.getMinutes() % 30 == 0 && self.getSeconds() == 0 && self.getMilliseconds() == 0",message="startAt must be on a half-hour boundary (hh:00:00 or hh:30:00)"
	StartAt metav1.Time `json:"startAt,omitzero"`

	// endAt is when the event ends (exclusive), on a half-hour boundary, after startAt and at
	// most 24 hours after it.
	// +required
	// +kubebuilder:validation:XValidation:rule="self.getMinutes() % 30 == 0 && self.getSeconds() == 0 && self.getMilliseconds() == 0",message="endAt must be on a half-hour boundary (hh:00:00 or hh:30:00)"
	EndAt metav1.Time `json:"endAt,omitzero"`

	// direction is turn_down (use less than usual) or turn_up (use more).
	// +required
	Direction FlexDirection `json:"direction,omitempty"`

	// ratePencePerKWh is what the household is paid per kWh delivered, in pence, as a
	// decimal string with at most 2 decimal places ("25", "12.5", "0.75"): the API types
	// carry no floats, and a string keeps the rate exact (settlement reads it into
	// hundredths of a penny). Never negative. "0" is a rate: the event is measured and
	// reported, and nothing is credited.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=9
	// +kubebuilder:validation:Pattern=`^(0|[1-9][0-9]{0,5})(\.[0-9]{1,2})?$`
	RatePencePerKWh string `json:"ratePencePerKWh,omitempty"`

	// siteNames lists the Sites (in the event's namespace) the event is for, settled as
	// listed; when absent, the event is for every site with an active enrolment in the
	// proposition at startAt.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	SiteNames []string `json:"siteNames,omitempty"`

	// market is the market the event's dispatches name (the DispatchEvent's market_id);
	// default: the proposition.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Market string `json:"market,omitempty"`

	// deadline is when sites whose readings do not yet cover the event are settled with what
	// there is (or skipped); default endAt + 48 h. Not before endAt.
	// +optional
	Deadline *metav1.Time `json:"deadline,omitempty"`
}

// DeadlineOrDefault is spec.deadline, or endAt + DefaultFlexEventDeadline when it is unset.
func (s *FlexEventSpec) DeadlineOrDefault() time.Time {
	if s.Deadline != nil {
		return s.Deadline.Time
	}
	return s.EndAt.Add(DefaultFlexEventDeadline)
}

// FlexDispatchSkipReason says why an asset of a target site was not asked to flex.
// +kubebuilder:validation:Enum=not_plugged_in;charge_now;no_dispatch_consent;no_power_rating
type FlexDispatchSkipReason string

// FlexSkippedAssets counts the assets of an event's target sites skipped for one reason.
type FlexSkippedAssets struct {
	// reason the assets were skipped for.
	// +required
	Reason FlexDispatchSkipReason `json:"reason,omitempty"`

	// assets is how many were skipped for it.
	// +required
	// +kubebuilder:validation:Minimum=1
	Assets int32 `json:"assets,omitempty"`
}

// FlexDispatches counts a flex event's dispatches: issued in all, and by current state.
type FlexDispatches struct {
	// issued is how many dispatches were issued (one per asset asked), whatever their state.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Issued int32 `json:"issued,omitempty"`
	// requested is how many were issued and have no status reported back yet.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Requested int32 `json:"requested,omitempty"`
	// received is how many the asset controller reported RECEIVED last.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Received int32 `json:"received,omitempty"`
	// accepted is how many the asset controller reported ACCEPTED last.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Accepted int32 `json:"accepted,omitempty"`
	// rejected is how many the asset controller REJECTED.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Rejected int32 `json:"rejected,omitempty"`
	// executed is how many the asset controller reported EXECUTED.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Executed int32 `json:"executed,omitempty"`
	// failed is how many the asset controller reported FAILED.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Failed int32 `json:"failed,omitempty"`
	// cancelled is how many were still open when the event was deleted before its end.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Cancelled int32 `json:"cancelled,omitempty"`
	// skipped counts the assets not asked, by reason.
	// +optional
	// +listType=map
	// +listMapKey=reason
	// +kubebuilder:validation:MaxItems=4
	Skipped []FlexSkippedAssets `json:"skipped,omitempty"`
	// issuedAt is when the controller issued the event's dispatches (at its creation, or 24 h
	// before its start when declared further ahead): they are not computed again, so an asset
	// that plugs in afterwards is not asked.
	// +optional
	IssuedAt *metav1.Time `json:"issuedAt,omitempty"`
	// summary says the above in a few words, for kubectl get -o wide ("12 asked: 3 accepted,
	// 8 executed, 1 failed; 2 skipped").
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Summary string `json:"summary,omitempty"`
}

// FlexSkippedSites counts the sites of an event skipped for one reason.
type FlexSkippedSites struct {
	// reason the sites were skipped for.
	// +required
	Reason FlexSkipReason `json:"reason,omitempty"`

	// sites is how many were skipped for it.
	// +required
	// +kubebuilder:validation:Minimum=1
	Sites int32 `json:"sites,omitempty"`
}

// FlexEventStatus is the observed state of a FlexEvent: what settlement has done so far.
// Each site's settlement (baseline, actual, credit) lives in the database; these are totals.
// +kubebuilder:validation:MinProperties=1
type FlexEventStatus struct {
	// conditions of the event. Ready=True once every site of the event is settled or
	// skipped; Reconciling=True while some wait for the event's end or their readings;
	// Stalled=True when settlement cannot go on until someone changes something.
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

	// sitesSettled is how many sites have been settled (credited, or settled at zero).
	// +optional
	// +kubebuilder:validation:Minimum=0
	SitesSettled int32 `json:"sitesSettled,omitempty"`

	// sitesSkipped counts the sites not settled, by reason.
	// +optional
	// +listType=map
	// +listMapKey=reason
	// +kubebuilder:validation:MaxItems=2
	SitesSkipped []FlexSkippedSites `json:"sitesSkipped,omitempty"`

	// flexWh is the settled sites' actual − baseline energy over the event, summed, in Wh
	// (flex_kwh × 1000; positive: more import than usual).
	// +optional
	FlexWh int64 `json:"flexWh,omitempty"`

	// dispatches counts the event's dispatches (docs/platform.md, "Dispatch: asking the devices") by
	// state, and the assets of its target sites that were not asked, by reason. Copied from
	// PostgreSQL, where every dispatch and each change of its status is kept.
	// +optional
	Dispatches *FlexDispatches `json:"dispatches,omitempty"`

	// creditPence is the settled sites' credits, summed, in pence.
	// +optional
	// +kubebuilder:validation:Minimum=0
	CreditPence int64 `json:"creditPence,omitempty"`

	// lateReadings counts readings of the event's window that arrived after their site was
	// settled: they change no credit, and are reported here.
	// +optional
	// +kubebuilder:validation:Minimum=0
	LateReadings int64 `json:"lateReadings,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fevent,categories=flexsite
// +kubebuilder:printcolumn:name="Proposition",type=string,JSONPath=`.spec.proposition`
// +kubebuilder:printcolumn:name="Start",type=string,JSONPath=`.spec.startAt`
// +kubebuilder:printcolumn:name="End",type=string,JSONPath=`.spec.endAt`
// +kubebuilder:printcolumn:name="Direction",type=string,JSONPath=`.spec.direction`
// +kubebuilder:printcolumn:name="Rate (p/kWh)",type=string,JSONPath=`.spec.ratePencePerKWh`
// +kubebuilder:printcolumn:name="Settled",type=integer,JSONPath=`.status.sitesSettled`
// +kubebuilder:printcolumn:name="Flex (Wh)",type=integer,JSONPath=`.status.flexWh`,priority=1
// +kubebuilder:printcolumn:name="Dispatched",type=integer,JSONPath=`.status.dispatches.issued`
// +kubebuilder:printcolumn:name="Executed",type=integer,JSONPath=`.status.dispatches.executed`
// +kubebuilder:printcolumn:name="Dispatch",type=string,JSONPath=`.status.dispatches.summary`,priority=1
// +kubebuilder:printcolumn:name="Credit (p)",type=integer,JSONPath=`.status.creditPence`
// +kubebuilder:printcolumn:name="Late readings",type=integer,JSONPath=`.status.lateReadings`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// FlexEvent is an organisation's flex event: a window in which the households of a
// proposition are asked to turn their consumption down (or up), and paid per kWh they
// deliver against their baseline (internal/settlement holds the rules). Each site is
// settled once, after the event ends.
type FlexEvent struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the event.
	// +required
	Spec FlexEventSpec `json:"spec,omitzero"`

	// status is what settlement has done so far.
	// +optional
	// +default={"observedGeneration": -1}
	Status FlexEventStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// FlexEventList contains a list of FlexEvent.
type FlexEventList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FlexEvent `json:"items"`
}

func init() {
	register(&FlexEvent{}, &FlexEventList{})
}

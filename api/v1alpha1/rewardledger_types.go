package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TransactionType is the kind of a reward transaction.
// +kubebuilder:validation:Enum="flex period";"flex period top-up";"flex event";withdrawal;"invoice paid";"goodwill credit";"signup bonus";correction
type TransactionType string

// PaymentStatus is the lifecycle state of a withdrawal's payment.
// +kubebuilder:validation:Enum=pending_approval;approved;processing;posted;failed;rejected;cancelled;returned
type PaymentStatus string

// RewardTransaction is one credit or debit of a site's reward balance.
// +kubebuilder:validation:XValidation:rule="self.type != 'withdrawal' || self.creditPence <= 0",message="a withdrawal is a debit: creditPence must be zero or negative"
// +kubebuilder:validation:XValidation:rule="!has(self.paymentStatus) || self.type == 'withdrawal'",message="paymentStatus is for withdrawals only"
// +kubebuilder:validation:XValidation:rule="!has(self.startTime) || !has(self.endTime) || self.endTime >= self.startTime",message="endTime must not be before startTime"
type RewardTransaction struct {
	// id of the transaction (UUID).
	// +required
	// +kubebuilder:validation:Pattern=`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`
	// +kubebuilder:validation:MinLength=36
	// +kubebuilder:validation:MaxLength=36
	ID string `json:"id,omitempty"`
	// type of the transaction.
	// +required
	Type TransactionType `json:"type,omitempty"`
	// creditPence is the amount credited, in pence (negative for a withdrawal).
	// +required
	CreditPence int64 `json:"creditPence"`
	// startTime is when a flex event started, a flex period's month start, or when a
	// withdrawal happened.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// endTime is when a flex event ended, or a flex period's month end.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// settlementDate is the date the transaction was settled, YYYY-MM-DD.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`
	// +kubebuilder:validation:MinLength=10
	// +kubebuilder:validation:MaxLength=10
	SettlementDate string `json:"settlementDate,omitempty"`
	// flexWh is the flexibility energy in watt-hours (the API's flex_kwh has 3 decimal
	// places, so Wh keeps it exact); positive means more import.
	// +optional
	FlexWh *int64 `json:"flexWh,omitempty"`
	// paymentStatus of a withdrawal.
	// +optional
	PaymentStatus PaymentStatus `json:"paymentStatus,omitempty"`
}

// RewardLedgerSpec holds a site's reward transactions.
// +kubebuilder:validation:XValidation:rule="self.siteName == oldSelf.siteName",message="siteName is immutable"
type RewardLedgerSpec struct {
	// siteName is the name of the Site, in the same namespace, the rewards belong to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SiteName string `json:"siteName,omitempty"`

	// transactions of the site, keyed by id so several writers can append with server-side
	// apply without conflicting. Bounded: a year of weekly rewards with withdrawals fits
	// many times over; older history is archived outside the cluster.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=1000
	Transactions []RewardTransaction `json:"transactions,omitempty"`
}

// RewardLedgerStatus is the notification state of a ledger: how far its transactions have been
// told (rewards.transaction_credited) and the events not yet delivered.
// +kubebuilder:validation:MinProperties=1
type RewardLedgerStatus struct {
	// observedGeneration is the generation of the spec whose transactions have been told
	// (the events of those after lastCreditedID recorded). The manager's cache keeps ledgers
	// without their transactions, so this is how the controller knows, without reading a
	// whole ledger from the API server, that nothing is new.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// lastCreditedID is the id of the last transaction (in list order) whose credit has been
	// recorded as an event; the transactions after it are new.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	LastCreditedID string `json:"lastCreditedID,omitempty"`

	// pendingEvents is the ledger's notification outbox (rewards.transaction_credited),
	// recorded in the status write that advances lastCreditedID. Bounded; see internal/events.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	PendingEvents []PendingEvent `json:"pendingEvents,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:selectablefield:JSONPath=`.spec.siteName`
// +kubebuilder:resource:shortName=fledger,categories=flexsite
// +kubebuilder:printcolumn:name="Site",type=string,JSONPath=`.spec.siteName`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// RewardLedger is the reward history of one Site: one object per site, not one per
// transaction, so a year of history on tens of thousands of sites stays within etcd's means.
type RewardLedger struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the site's reward transactions.
	// +required
	Spec RewardLedgerSpec `json:"spec,omitzero"`

	// status is the ledger's notification state.
	// +optional
	Status RewardLedgerStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// RewardLedgerList contains a list of RewardLedger.
type RewardLedgerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RewardLedger `json:"items"`
}

func init() {
	register(&RewardLedger{}, &RewardLedgerList{})
}

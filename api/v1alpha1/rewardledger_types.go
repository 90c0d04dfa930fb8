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
	// creditPence is the amount credited, in pence (negative for a withdrawal); at most
	// 10^12 either way (household.MaxTransactionPence), so that no site's sums can pass what
	// the database adds up.
	// +required
	// +kubebuilder:validation:Minimum=-1000000000000
	// +kubebuilder:validation:Maximum=1000000000000
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

// RecentTransaction is one of a ledger's latest transactions, in brief: a site's object stays
// small (the full record is the database's).
type RecentTransaction struct {
	// id of the transaction (UUID).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id,omitempty"`
	// type of the transaction.
	// +required
	Type TransactionType `json:"type,omitempty"`
	// creditPence is the amount credited, in pence (negative for a withdrawal).
	// +required
	CreditPence int64 `json:"creditPence"`
	// at is when it happened: its start, else its settlement date.
	// +optional
	At *metav1.Time `json:"at,omitempty"`
	// paymentStatus of a withdrawal, now.
	// +optional
	PaymentStatus PaymentStatus `json:"paymentStatus,omitempty"`
}

// RewardLedgerSpec declares reward transactions of a site: an inbox. Flexsite keeps every
// transaction in its database; the controller ingests these by id, once, and never rewrites
// the spec.
// +kubebuilder:validation:XValidation:rule="self.siteName == oldSelf.siteName",message="siteName is immutable"
type RewardLedgerSpec struct {
	// siteName is the name of the Site, in the same namespace, the rewards belong to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SiteName string `json:"siteName,omitempty"`

	// transactions declared for the site, keyed by id so several writers can append with
	// server-side apply without conflicting. Each is stored in Flexsite's database once (the
	// same id with other fields is refused: see the Ingested condition); a withdrawal whose
	// paymentStatus changes here has the change recorded when its payment's state machine
	// allows that step (pending_approval to approved, rejected or cancelled; approved to
	// processing or cancelled; processing to posted or failed; posted to returned), and is
	// otherwise refused, changing nothing. Transactions may be removed from the spec once
	// ingested: the history is the database's.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=1000
	Transactions []RewardTransaction `json:"transactions,omitempty"`
}

// RewardLedgerStatus is a summary of the site's reward history (which is in Flexsite's
// database), whether the spec's transactions are ingested, and the notification outbox.
// +kubebuilder:validation:MinProperties=1
type RewardLedgerStatus struct {
	// conditions of the ledger: Ingested says whether every transaction of the spec is stored
	// (False names those refused).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec whose transactions have been ingested.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// balancePence is the site's current balance, in pence (withdrawals that paid nothing
	// out are not counted).
	// +optional
	BalancePence *int64 `json:"balancePence,omitempty"`

	// totalEarnedPence is the sum of the site's credits, in pence.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TotalEarnedPence *int64 `json:"totalEarnedPence,omitempty"`

	// transactionCount is the number of transactions in the site's history.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TransactionCount *int64 `json:"transactionCount,omitempty"`

	// lastCredited is when the latest credit happened.
	// +optional
	LastCredited *metav1.Time `json:"lastCredited,omitempty"`

	// firstRewardedAt is when the site's first reward happened: the withdrawal wait counts from it.
	// +optional
	FirstRewardedAt *metav1.Time `json:"firstRewardedAt,omitempty"`

	// historyRevision is the revision of the site's history this summary was computed from: how
	// many changes (transactions, withdrawal status changes) the database had recorded.
	// +optional
	// +kubebuilder:validation:Minimum=0
	HistoryRevision *int64 `json:"historyRevision,omitempty"`

	// recentTransactions are the 10 latest transactions in brief, newest first (the whole
	// history, every field, is GET /rewards/{site_id}/transactions).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	RecentTransactions []RecentTransaction `json:"recentTransactions,omitempty"`

	// lastCreditedID is no longer written (credits are told from the database's outbox); kept
	// so that objects written by earlier versions still validate.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	LastCreditedID string `json:"lastCreditedID,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:selectablefield:JSONPath=`.spec.siteName`
// +kubebuilder:resource:shortName=fledger,categories=flexsite
// +kubebuilder:printcolumn:name="Site",type=string,JSONPath=`.spec.siteName`
// +kubebuilder:printcolumn:name="Balance",type=integer,JSONPath=`.status.balancePence`
// +kubebuilder:printcolumn:name="Transactions",type=integer,JSONPath=`.status.transactionCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// RewardLedger is one Site's rewards in the cluster: an inbox of declared transactions (spec)
// and a summary of the whole history (status), which lives in Flexsite's database, so a
// site's object stays small whatever its history.
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
	// The status is atomic for server-side apply: its writers replace it whole (merge patches
	// of what they computed), and its managed fields name it once rather than each of its fields
	// (docs/scale.md, etcd per household).
	// +structType=atomic
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

// IngestedCondition, on a RewardLedger, says whether every transaction of its spec is stored
// in Flexsite's database (False: a transaction's id is stored with other fields, a withdrawal's
// paymentStatus asks a step its payment's state machine does not allow, or the database is
// unavailable).
const IngestedCondition = "Ingested"

// Reasons of the Ingested condition.
const (
	ReasonIngested             = "Ingested"
	ReasonTransactionRefused   = "TransactionRefused"
	ReasonPaymentStatusRefused = "PaymentStatusRefused"
	ReasonDatabaseUnavailable  = "DatabaseUnavailable"
)

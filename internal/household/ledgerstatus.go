package household

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// A RewardLedger's status, as its controller writes it from the history in the database
// (docs/api.md, "Reward history").

// IngestedCondition says whether every transaction of the spec (at generation) is stored:
// False naming the ids stored with other fields and the payment status changes refused.
func IngestedCondition(generation int64, refused, steps []string) metav1.Condition {
	cond := metav1.Condition{Type: flexv1.IngestedCondition, Status: metav1.ConditionTrue, Reason: flexv1.ReasonIngested,
		ObservedGeneration: generation, Message: "Every transaction of the spec is stored"}
	var says []string
	if len(refused) > 0 {
		cond.Reason = flexv1.ReasonTransactionRefused
		says = append(says, "Stored with other fields already (a correction is a new transaction): "+strings.Join(refused, ", "))
	}
	if len(steps) > 0 {
		if len(refused) == 0 {
			cond.Reason = flexv1.ReasonPaymentStatusRefused
		}
		says = append(says, "Payment status changes refused, nothing changed: "+strings.Join(steps, "; "))
	}
	if len(says) > 0 {
		cond.Status, cond.Message = metav1.ConditionFalse, strings.Join(says, ". ")
	}
	return cond
}

// WholeSeconds is t as the API server keeps a time, to the second (nil: none), so that the
// summary read back compares equal.
func WholeSeconds(t *time.Time) *metav1.Time {
	if t == nil {
		return nil
	}
	return &metav1.Time{Time: t.UTC().Truncate(time.Second)}
}

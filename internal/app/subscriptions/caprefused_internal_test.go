package subscriptions

import (
	"errors"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/validation"
)

// The webhook's refusal, as the API server answers it to a REST create that another replica's
// cache saw past the cap, is the REST API's own 409; other errors pass through.
func TestCapRefused(t *testing.T) {
	sentence := validation.SubscriptionsFull(25, 25).Error()
	denied := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden,
		Reason: metav1.StatusReasonForbidden, Message: `admission webhook "vsubscription.flexsite.io" denied the request: ` +
			`subscriptions.flexsite.io "3f2a" is forbidden: ` + sentence}}
	e := app.As(capRefused(denied))
	if e == nil || e.Kind != app.Conflict || e.Detail != sentence {
		t.Errorf("capRefused(the webhook's refusal) = %+v, want Conflict %q", e, sentence)
	}
	rbac := apierrors.NewForbidden(schema.GroupResource{Group: "flexsite.io", Resource: "subscriptions"}, "x",
		errors.New(`User "system:serviceaccount:flexsite-system:flexsite" cannot create resource`))
	if got := capRefused(rbac); got != error(rbac) {
		t.Errorf("capRefused(an RBAC refusal) = %v, want it unchanged", got)
	}
	other := errors.New("connection refused")
	if got := capRefused(other); got != other {
		t.Errorf("capRefused(%v) = %v", other, got)
	}
}

package admission

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/validation"
)

// +kubebuilder:webhook:path=/validate-flexsite-io-v1alpha1-subscription,mutating=false,failurePolicy=fail,sideEffects=None,groups=flexsite.io,resources=subscriptions,verbs=create,versions=v1alpha1,name=vsubscription.flexsite.io,admissionReviewVersions=v1

// subscriptionValidator caps an organisation's notification subscriptions at the number the
// REST API caps them at (householdstore.SubscriptionRoom, counted in the manager's cache: no
// API-server request), so kubectl and GitOps cannot add the 26th either. The refusal is
// Forbidden, as a namespace's ResourceQuota refuses an object past its quota. Only creates
// are judged: changing or deleting a subscription never needs room.
type subscriptionValidator struct {
	cache   client.Reader
	maxSubs int
}

func (v *subscriptionValidator) ValidateCreate(ctx context.Context, sub *flexv1.Subscription) (admission.Warnings, error) {
	err := householdstore.SubscriptionRoom(ctx, v.cache, sub.Namespace, v.maxSubs)
	var full *validation.Error
	if errors.As(err, &full) {
		return nil, apierrors.NewForbidden(schema.GroupResource{Group: flexv1.GroupVersion.Group, Resource: "subscriptions"},
			sub.Name, full)
	}
	return nil, err
}

func (v *subscriptionValidator) ValidateUpdate(context.Context, *flexv1.Subscription, *flexv1.Subscription) (admission.Warnings, error) {
	return nil, nil
}

func (v *subscriptionValidator) ValidateDelete(context.Context, *flexv1.Subscription) (admission.Warnings, error) {
	return nil, nil
}

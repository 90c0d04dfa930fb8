package webhook

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
)

// +kubebuilder:webhook:path=/validate-flexsite-io-v1alpha1-enrolment,mutating=false,failurePolicy=fail,sideEffects=None,groups=flexsite.io,resources=enrolments,verbs=create,versions=v1alpha1,name=venrolment.flexsite.io,admissionReviewVersions=v1

// enrolmentValidator keeps a household's withdrawal binding whichever door an enrolment comes
// through: a site that withdrew from a proposition is not enrolled again unless the
// enrolment says it overrides the withdrawal (the REST facade's previously_withdrew rule).
type enrolmentValidator struct{ *lookups }

func (v *enrolmentValidator) ValidateCreate(ctx context.Context, enr *flexv1.Enrolment) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	site, err := v.site(ctx, enr.Namespace, enr.Spec.SiteName)
	if err != nil {
		return nil, err
	}
	var warnings admission.Warnings
	if site == nil {
		warnings = append(warnings, fmt.Sprintf("spec.siteName: Site %q does not exist (yet); "+
			"the enrolment stays Pending until it does", enr.Spec.SiteName))
	} else if at, withdrew := site.Annotations[identity.WithdrawalAnnotation(enr.Spec.Proposition)]; withdrew && !enr.Spec.OverrideWithdrawal {
		errs = append(errs, field.Forbidden(spec.Child("overrideWithdrawal"), fmt.Sprintf(
			"the household of Site %q withdrew from %s at %s; set spec.overrideWithdrawal: true to re-enrol it",
			site.Name, enr.Spec.Proposition, at)))
	}
	list := &flexv1.EnrolmentList{}
	if err := v.cache.List(ctx, list, client.InNamespace(enr.Namespace),
		client.MatchingFields{index.SiteName: enr.Spec.SiteName}); err != nil {
		return nil, err
	}
	for _, other := range list.Items {
		if other.Name != enr.Name && other.Spec.Proposition == enr.Spec.Proposition && other.DeletionTimestamp.IsZero() {
			errs = append(errs, field.Invalid(spec.Child("proposition"), enr.Spec.Proposition,
				fmt.Sprintf("Site %q is already enrolled in it by Enrolment %q", enr.Spec.SiteName, other.Name)))
			break
		}
	}
	return warnings, invalid("Enrolment", enr.Name, errs)
}

func (v *enrolmentValidator) ValidateUpdate(context.Context, *flexv1.Enrolment, *flexv1.Enrolment) (admission.Warnings, error) {
	return nil, nil
}

func (v *enrolmentValidator) ValidateDelete(context.Context, *flexv1.Enrolment) (admission.Warnings, error) {
	return nil, nil
}

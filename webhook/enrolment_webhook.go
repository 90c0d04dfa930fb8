package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/index"
)

// The webhook writes an EnrolmentClaim when it admits an enrolment under a name of its own, so
// its side effects are none on dry run only (it then writes nothing).
// +kubebuilder:webhook:path=/validate-flexsite-io-v1alpha1-enrolment,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=flexsite.io,resources=enrolments,verbs=create,versions=v1alpha1,name=venrolment.flexsite.io,admissionReviewVersions=v1
// +kubebuilder:rbac:groups=flexsite.io,resources=enrolmentclaims,verbs=get;create;delete

// enrolmentValidator translates the household's enrolment decision for a new Enrolment: a
// household's withdrawal binds whichever door an enrolment comes through, so an enrolment
// that does not override it is refused (the REST API's previously_withdrew). The other
// refusals (not offered, consent missing, not eligible, site not there yet) can change
// without touching the Enrolment, so a declared enrolment is accepted with a warning and its
// status says Stalled until they do. A site has one enrolment per proposition: an enrolment
// named after its site and proposition holds them by its name; one under another name is
// admitted only with the EnrolmentClaim of their name, made here before it is stored
// (household's "Which Enrolment holds a site's enrolment").
type enrolmentValidator struct {
	*lookups
	client client.Client
	now    func() time.Time
}

func (v *enrolmentValidator) ValidateCreate(ctx context.Context, enr *flexv1.Enrolment) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	// The site is read from the API server, not the cache: a withdrawal recorded a moment ago
	// must bind the very next enrolment (enrolments are created rarely; one GET is cheap).
	site := &flexv1.Site{}
	if err := v.api.Get(ctx, client.ObjectKey{Namespace: enr.Namespace, Name: enr.Spec.SiteName}, site); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		site = nil
	}
	rules, err := householdstore.LoadRules(ctx, v.cache)
	if err != nil {
		return nil, err
	}
	req := household.EnrolmentRequest{Site: site, Proposition: enr.Spec.Proposition,
		Override: enr.Spec.OverrideWithdrawal, Enrolment: enr, Rules: rules}
	if site != nil && evaluatedNow(site) {
		// The status judges the assets it was evaluated with: an asset created a moment ago
		// (declared in the same apply, just before the enrolment) is not in it yet, and its
		// verdict would warn of a site "with no assets" that has one. Only a status evaluated
		// from exactly the assets the cache holds is taken; else the verdict is pending. Only
		// a site whose status is current needs them (a new household's has none yet: its
		// verdict is pending whatever its assets), and they come from the cache's index, not
		// a LIST: the API server answers a LIST by going through the whole namespace, on every
		// Enrolment created (docs/scale.md, "Request paths: no LIST"). An asset the cache has
		// not seen yet can only make the answer a warning the enrolment's status soon corrects
		// (the Enrolment controller decides from the site's next status); never a refusal.
		assets, err := index.NewLookup(v.cache).AssetsOfSite(ctx, site.Namespace, site.Name)
		if err != nil {
			return nil, err
		}
		req.Eligibility = household.CurrentEligibility(site, assets, rules)
	}
	var errs field.ErrorList
	var warnings admission.Warnings
	switch d := household.DecideEnrolment(req); {
	case d.Verdict == household.PreviouslyWithdrew:
		errs = append(errs, field.Forbidden(spec.Child("overrideWithdrawal"), fmt.Sprintf(
			"%s (Site %q); set spec.overrideWithdrawal: true to re-enrol it", d.Message, enr.Spec.SiteName)))
	case d.Reason == flexv1.ReasonEligibilityPending:
		// The usual case for a site declared with its enrolment: nothing to warn about.
	case d.Refused():
		warnings = append(warnings, fmt.Sprintf("spec.siteName: Site %q: %s; the enrolment stays inactive until that changes",
			enr.Spec.SiteName, d.Message))
	}
	if len(errs) == 0 {
		// Claimed last: an enrolment refused for anything else writes nothing.
		if err := v.claim(ctx, enr); err != nil {
			var taken *household.AlreadyEnrolledError
			if !errors.As(err, &taken) {
				return nil, err
			}
			msg := fmt.Sprintf("Site %q is already enrolled in it by Enrolment %q", enr.Spec.SiteName, taken.Holder)
			if taken.Pending {
				msg = fmt.Sprintf("Site %q is being enrolled in it by Enrolment %q at this moment; try again", enr.Spec.SiteName, taken.Holder)
			}
			errs = append(errs, field.Invalid(spec.Child("proposition"), enr.Spec.Proposition, msg))
		}
	}
	return warnings, invalid("Enrolment", enr.Name, errs)
}

// claim holds enr's site and proposition for enr: by its name when it is named after them
// (no claim), else by the EnrolmentClaim of their name (nothing on a dry run); or reports a
// household.AlreadyEnrolledError.
func (v *enrolmentValidator) claim(ctx context.Context, enr *flexv1.Enrolment) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return err
	}
	dryRun := req.DryRun != nil && *req.DryRun
	return householdstore.HoldEnrolment(ctx, v.client, v.api, index.NewLookup(v.cache), enr, v.now(), dryRun)
}

// evaluatedNow reports whether the site's status holds an eligibility computed from its
// current spec.
func evaluatedNow(site *flexv1.Site) bool {
	_, current := household.EvaluatedEligibility(site)
	return current
}

func (v *enrolmentValidator) ValidateUpdate(context.Context, *flexv1.Enrolment, *flexv1.Enrolment) (admission.Warnings, error) {
	return nil, nil
}

func (v *enrolmentValidator) ValidateDelete(context.Context, *flexv1.Enrolment) (admission.Warnings, error) {
	return nil, nil
}

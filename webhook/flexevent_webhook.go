package admission

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/validation"
)

// +kubebuilder:webhook:path=/validate-flexsite-io-v1alpha1-flexevent,mutating=false,failurePolicy=fail,sideEffects=None,groups=flexsite.io,resources=flexevents,verbs=create;update,versions=v1alpha1,name=vflexevent.flexsite.io,admissionReviewVersions=v1

// flexEventValidator refuses a FlexEvent for a proposition that is not offered (no
// Proposition object of that name: there is no enrolment in it to settle), and applies the
// event's field rules (internal/validation: the ones the REST API applies; the CRD's CEL
// rules say the same, so these only refuse what an API server without them would store).
// It bounds what an event can pay as the REST API does: a start at most
// validation.MaxFlexBackdate before now, a rate at most the organisation's maximum. The spec
// is immutable but for its deadline (CEL), so an update is judged only on what it changes of
// the start and the rate (none, under CEL): a Proposition withdrawn later, or an event grown
// older than the bound, does not block the event's settlement or its deadline's change.
type flexEventValidator struct {
	*lookups
	now func() time.Time
}

func (v *flexEventValidator) ValidateCreate(ctx context.Context, ev *flexv1.FlexEvent) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	errs := flexEventFields(spec, &ev.Spec)
	bounds, err := v.bounds(ctx, ev, nil)
	if err != nil {
		return nil, err
	}
	errs = append(errs, bounds...)
	name := identity.PropositionObjectName(ev.Spec.Proposition)
	offered, err := v.proposition(ctx, name)
	if err != nil {
		return nil, err
	}
	if !offered {
		errs = append(errs, field.Invalid(spec.Child("proposition"), ev.Spec.Proposition, fmt.Sprintf(
			"the proposition is not offered: there is no Proposition %q", name)))
	}
	return nil, invalid("FlexEvent", ev.Name, errs)
}

// flexEventFields applies internal/validation's flex event rules to a spec.
func flexEventFields(spec *field.Path, s *flexv1.FlexEventSpec) field.ErrorList {
	var errs field.ErrorList
	add := func(p *field.Path, value any, err error) {
		if err != nil {
			errs = append(errs, field.Invalid(p, value, err.Error()))
		}
	}
	add(spec.Child("startAt"), s.StartAt.UTC().Format("2006-01-02T15:04:05Z"), validation.HalfHourBoundary(s.StartAt.Time))
	add(spec.Child("endAt"), s.EndAt.UTC().Format("2006-01-02T15:04:05Z"), validation.HalfHourBoundary(s.EndAt.Time))
	add(spec.Child("endAt"), s.EndAt.UTC().Format("2006-01-02T15:04:05Z"), validation.FlexWindow(s.StartAt.Time, s.EndAt.Time))
	add(spec.Child("direction"), s.Direction, validation.FlexDirection(string(s.Direction)))
	_, err := validation.ParseFlexRate(s.RatePencePerKWh)
	add(spec.Child("ratePencePerKWh"), s.RatePencePerKWh, err)
	if s.Deadline != nil && s.Deadline.Before(&s.EndAt) {
		errs = append(errs, field.Invalid(spec.Child("deadline"), s.Deadline.UTC().Format("2006-01-02T15:04:05Z"),
			"deadline must not be before endAt"))
	}
	return errs
}

// proposition reports whether the Proposition object exists: from the cache, and from the API
// server when the cache misses (a Proposition applied a moment before the event).
func (v *flexEventValidator) proposition(ctx context.Context, name string) (bool, error) {
	p := &flexv1.Proposition{}
	err := v.cache.Get(ctx, client.ObjectKey{Name: name}, p)
	if apierrors.IsNotFound(err) {
		err = v.api.Get(ctx, client.ObjectKey{Name: name}, p)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func (v *flexEventValidator) ValidateUpdate(ctx context.Context, old, ev *flexv1.FlexEvent) (admission.Warnings, error) {
	errs, err := v.bounds(ctx, ev, old)
	if err != nil {
		return nil, err
	}
	return nil, invalid("FlexEvent", ev.Name, errs)
}

// bounds applies the bounds on what an event can pay (the start's age, the organisation's
// maximum rate) to a new event, or to what an update changes of old.
func (v *flexEventValidator) bounds(ctx context.Context, ev, old *flexv1.FlexEvent) (field.ErrorList, error) {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if old == nil || !old.Spec.StartAt.Equal(&ev.Spec.StartAt) {
		if err := validation.FlexStartNotTooEarly(ev.Spec.StartAt.Time, v.now()); err != nil {
			errs = append(errs, field.Invalid(spec.Child("startAt"), ev.Spec.StartAt.UTC().Format(time.RFC3339), err.Error()))
		}
	}
	if old != nil && old.Spec.RatePencePerKWh == ev.Spec.RatePencePerKWh {
		return errs, nil
	}
	rate, err := validation.ParseFlexRate(ev.Spec.RatePencePerKWh)
	if err != nil {
		return errs, nil // flexEventFields (or CEL) says so
	}
	maxRate, err := householdstore.MaxFlexRate(ctx, v.cache, v.api, ev.Namespace)
	if err != nil {
		return nil, err
	}
	if err := validation.FlexRateAtMost(rate, maxRate); err != nil {
		errs = append(errs, field.Invalid(spec.Child("ratePencePerKWh"), ev.Spec.RatePencePerKWh, err.Error()))
	}
	return errs, nil
}

func (v *flexEventValidator) ValidateDelete(context.Context, *flexv1.FlexEvent) (admission.Warnings, error) {
	return nil, nil
}

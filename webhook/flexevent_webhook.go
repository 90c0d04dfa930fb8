package admission

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// event's rules (validation.CheckFlexEvent, the function the REST API's use case calls; the
// CRD's CEL rules are its twin, so these only refuse what an API server without them would
// store). It bounds what an event can pay as the REST API does: a start at most
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
	errs := flexEventFields(spec, &ev.Spec, v.now())
	bounds, err := v.rateBound(ctx, ev, nil)
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

// flexEventFields applies validation.CheckFlexEvent, the rules the REST API applies, to a
// spec declared at declaredAt (zero: not a new declaration, so no bound on the start's age).
func flexEventFields(spec *field.Path, s *flexv1.FlexEventSpec, declaredAt time.Time) field.ErrorList {
	rate, err := validation.ParseFlexRate(s.RatePencePerKWh)
	var errs field.ErrorList
	if err != nil {
		errs = append(errs, field.Invalid(spec.Child("ratePencePerKWh"), s.RatePencePerKWh, err.Error()))
		rate = 0 // reported: not again by CheckFlexEvent
	}
	e := validation.FlexEvent{Start: s.StartAt.Time, End: s.EndAt.Time, Direction: string(s.Direction),
		RateCentipence: rate, DeclaredAt: declaredAt}
	if s.Deadline != nil {
		e.Deadline = s.Deadline.Time
	}
	stamp := func(t metav1.Time) string { return t.UTC().Format(time.RFC3339) }
	for _, p := range validation.CheckFlexEvent(e) {
		var path *field.Path
		var value any
		switch p.Field {
		case validation.FlexStartField:
			path, value = spec.Child("startAt"), stamp(s.StartAt)
		case validation.FlexEndField:
			path, value = spec.Child("endAt"), stamp(s.EndAt)
		case validation.FlexDirectionField:
			path, value = spec.Child("direction"), s.Direction
		case validation.FlexRateField:
			path, value = spec.Child("ratePencePerKWh"), s.RatePencePerKWh
		default:
			path, value = spec.Child("deadline"), stamp(*s.Deadline)
		}
		errs = append(errs, field.Invalid(path, value, p.Err.Msg))
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
	var errs field.ErrorList
	if !old.Spec.StartAt.Equal(&ev.Spec.StartAt) {
		// A new start is a new declaration (CEL forbids it; an API server without CEL does not).
		errs = flexEventFields(field.NewPath("spec"), &ev.Spec, v.now())
	}
	bounds, err := v.rateBound(ctx, ev, old)
	if err != nil {
		return nil, err
	}
	return nil, invalid("FlexEvent", ev.Name, append(errs, bounds...))
}

// rateBound applies the organisation's maximum rate to a new event, or to an update that
// changes old's rate.
func (v *flexEventValidator) rateBound(ctx context.Context, ev, old *flexv1.FlexEvent) (field.ErrorList, error) {
	if old != nil && old.Spec.RatePencePerKWh == ev.Spec.RatePencePerKWh {
		return nil, nil
	}
	rate, err := validation.ParseFlexRate(ev.Spec.RatePencePerKWh)
	if err != nil {
		return nil, nil // flexEventFields (or CEL) says so
	}
	maxRate, err := householdstore.MaxFlexRate(ctx, v.cache, v.api, ev.Namespace)
	if err != nil {
		return nil, err
	}
	if err := validation.FlexRateAtMost(rate, maxRate); err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "ratePencePerKWh"), ev.Spec.RatePencePerKWh, err.Error())}, nil
	}
	return nil, nil
}

func (v *flexEventValidator) ValidateDelete(context.Context, *flexv1.FlexEvent) (admission.Warnings, error) {
	return nil, nil
}

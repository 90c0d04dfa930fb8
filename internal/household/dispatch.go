package household

import (
	"slices"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// A household consents to being dispatched in some ways (spec.dispatchMethods) and may take
// that consent back. Consent is a set: giving it again changes nothing, and so does taking
// back what was never given. The stored order is kept, so that a call that changes nothing
// leaves the spec exactly as it was and writes nothing.

// dispatchMethodsField is the API's name of the field both changes report.
const dispatchMethodsField = "dispatch_methods"

// ConsentDispatch adds methods to the site's dispatch methods: those not stored yet are
// appended, in the order given, after the stored ones. It names the field when it changed.
func ConsentDispatch(spec *flexv1.SiteSpec, methods []flexv1.DispatchMethod) []string {
	merged := slices.Clone(spec.DispatchMethods)
	for _, m := range methods {
		if !slices.Contains(merged, m) {
			merged = append(merged, m)
		}
	}
	if len(merged) == len(spec.DispatchMethods) {
		return nil
	}
	spec.DispatchMethods = merged
	return []string{dispatchMethodsField}
}

// DeconsentDispatch removes methods from the site's dispatch methods, keeping the order of
// the rest. It names the field when it changed; a site left with none stores none (nil).
func DeconsentDispatch(spec *flexv1.SiteSpec, methods []flexv1.DispatchMethod) []string {
	kept := slices.DeleteFunc(slices.Clone(spec.DispatchMethods), func(m flexv1.DispatchMethod) bool {
		return slices.Contains(methods, m)
	})
	if len(kept) == len(spec.DispatchMethods) {
		return nil
	}
	if len(kept) == 0 {
		kept = nil
	}
	spec.DispatchMethods = kept
	return []string{dispatchMethodsField}
}

package admission

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	claimrule "github.com/flexsite/flexsite/internal/claim"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/validation"
)

// +kubebuilder:webhook:path=/mutate-flexsite-io-v1alpha1-site,mutating=true,failurePolicy=fail,sideEffects=None,groups=flexsite.io,resources=sites,verbs=create;update,versions=v1alpha1,name=msite.flexsite.io,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-flexsite-io-v1alpha1-site,mutating=false,failurePolicy=fail,sideEffects=None,groups=flexsite.io,resources=sites,verbs=create;update,versions=v1alpha1,name=vsite.flexsite.io,admissionReviewVersions=v1

// siteDefaulter normalises what people type: "sw1a1aa" becomes "SW1A 1AA", and spaces go
// from an MPAN. Values it cannot read are left for the validator to explain.
type siteDefaulter struct{}

func (siteDefaulter) Default(_ context.Context, site *flexv1.Site) error {
	if pc, err := validation.NormalisePostcode(site.Spec.Postcode); err == nil {
		site.Spec.Postcode = pc
	}
	site.Spec.MPAN = strings.Join(strings.Fields(site.Spec.MPAN), "")
	return nil
}

type siteValidator struct {
	*lookups
	now func() time.Time
}

func (v *siteValidator) ValidateCreate(ctx context.Context, site *flexv1.Site) (admission.Warnings, error) {
	return nil, v.validate(ctx, site, nil)
}

func (v *siteValidator) ValidateUpdate(ctx context.Context, old, site *flexv1.Site) (admission.Warnings, error) {
	return nil, v.validate(ctx, site, &old.Spec)
}

func (v *siteValidator) ValidateDelete(context.Context, *flexv1.Site) (admission.Warnings, error) {
	return nil, nil
}

func (v *siteValidator) validate(ctx context.Context, site *flexv1.Site, old *flexv1.SiteSpec) error {
	spec := field.NewPath("spec")
	oldMPAN := ""
	if old != nil {
		oldMPAN = old.MPAN
	}
	now := time.Now
	if v.now != nil {
		now = v.now
	}
	errs := SiteSpecErrors(&site.Spec, old, spec, now())
	if site.Spec.MPAN != "" && len(errs) == 0 {
		errs = append(errs, v.claimErrors(ctx, site, oldMPAN, spec.Child("mpan"))...)
	}
	if site.Spec.MPAN != "" && len(errs) == 0 {
		others, err := v.sitesWith(ctx, site, index.NewLookup(v.cache).SitesByMPAN, site.Spec.MPAN)
		if err != nil {
			return err
		}
		if len(others) > 0 {
			errs = append(errs, field.Invalid(spec.Child("mpan"), site.Spec.MPAN,
				fmt.Sprintf("MPAN is already registered in this organisation by Site %q", others[0])))
		}
	}
	return invalid("Site", site.Name, errs)
}

// claimErrors applies the rules of who holds a meter point (household.Standing): a site that
// comes to hold an MPAN it was not created with needs the MPANClaim for it, read from the API
// server because the claimant wrote it a moment ago; and no site may hold an MPAN another
// site has claimed.
func (v *siteValidator) claimErrors(ctx context.Context, site *flexv1.Site, oldMPAN string, path *field.Path) field.ErrorList {
	mpan := site.Spec.MPAN
	key := client.ObjectKey{Namespace: site.Namespace, Name: identity.MPANClaimName(mpan)}
	changed := oldMPAN != "" && oldMPAN != mpan
	reader := v.cache
	if changed || (oldMPAN == "" && !household.HoldsByName(site) && site.CreationTimestamp.IsZero()) {
		reader = v.api
	}
	claim := &flexv1.MPANClaim{}
	err := reader.Get(ctx, key, claim)
	switch {
	case apierrors.IsNotFound(err):
		// A site going back to the MPAN its name holds needs no claim (that is how a failed
		// change is undone); any other change does.
		if changed && !household.HoldsByName(site) {
			return field.ErrorList{field.Forbidden(path, fmt.Sprintf("changing a site's MPAN needs the MPANClaim %s "+
				"naming this site first (PATCH /entities/site/{site_id} makes it), so that no other site can take "+
				"the MPAN meanwhile", key.Name))}
		}
		return nil
	case err != nil:
		return field.ErrorList{field.InternalError(path, err)}
	case claim.Spec.SiteName == site.Name:
		return nil
	}
	holder, err := v.site(ctx, site.Namespace, claim.Spec.SiteName)
	if err != nil {
		return field.ErrorList{field.InternalError(path, err)}
	}
	if household.Standing(claim, holder, time.Now()) == claimrule.Stale && !changed {
		return nil
	}
	return field.ErrorList{field.Invalid(path, mpan, fmt.Sprintf("MPAN is claimed by Site %q (MPANClaim %s)",
		claim.Spec.SiteName, key.Name))}
}

// SiteSpecErrors checks a site's fields with the domain rules (the schema already bounds
// lengths and shapes). On an update (old not nil) the free text and the consent time are
// checked only when they change, so that a site stored before a rule existed can still be
// updated (by its controller's finalizer, say).
func SiteSpecErrors(spec, old *flexv1.SiteSpec, path *field.Path, now time.Time) field.ErrorList {
	var errs field.ErrorList
	for _, t := range []struct {
		name      string
		val, prev string
	}{
		{"streetAddress", spec.StreetAddress, oldOr(old, func(o *flexv1.SiteSpec) string { return o.StreetAddress })},
		{"externalUserID", spec.ExternalUserID, oldOr(old, func(o *flexv1.SiteSpec) string { return o.ExternalUserID })},
	} {
		errs = append(errs, textErrors(path.Child(t.name), t.val, t.prev, old != nil)...)
	}
	if c := spec.BoundaryMeterConsentAt; c != nil && (old == nil || old.BoundaryMeterConsentAt == nil ||
		!old.BoundaryMeterConsentAt.Equal(c)) {
		if err := validation.ValidateConsentTime(c.Time, now); err != nil {
			errs = append(errs, field.Invalid(path.Child("boundaryMeterConsentAt"), c.UTC().Format(time.RFC3339), err.Error()))
		}
	}
	if spec.MPAN != "" {
		if _, err := validation.NormaliseMPAN(spec.MPAN); err != nil {
			errs = append(errs, field.Invalid(path.Child("mpan"), spec.MPAN, err.Error()))
		}
	}
	if spec.Postcode != "" {
		if _, err := validation.NormalisePostcode(spec.Postcode); err != nil {
			errs = append(errs, field.Invalid(path.Child("postcode"), spec.Postcode, err.Error()))
		}
	}
	if spec.Email != "" {
		if err := validation.ValidateEmail(spec.Email); err != nil {
			errs = append(errs, field.Invalid(path.Child("email"), spec.Email, err.Error()))
		}
	}
	return errs
}

// sitesWith names the other live Sites of the namespace that find finds by value.
func (v *siteValidator) sitesWith(ctx context.Context, site *flexv1.Site,
	find func(ctx context.Context, ns, value string) ([]*flexv1.Site, error), value string) ([]string, error) {
	others, err := find(ctx, site.Namespace, value)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, other := range others {
		if other.Name != site.Name && other.DeletionTimestamp.IsZero() {
			names = append(names, other.Name)
		}
	}
	return names, nil
}

// oldOr answers a field of the old spec, or "" on a create.
func oldOr[T any](old *T, get func(*T) string) string {
	if old == nil {
		return ""
	}
	return get(old)
}

// textErrors refuses single-line text with control characters (validation.SingleLineText),
// unless it is an update that leaves the value as it was.
func textErrors(path *field.Path, val, prev string, update bool) field.ErrorList {
	if val == "" || (update && val == prev) {
		return nil
	}
	if err := validation.SingleLineText(val); err != nil {
		return field.ErrorList{field.Invalid(path, val, err.Error())}
	}
	return nil
}

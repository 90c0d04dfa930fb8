package admission

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/validation"
)

// +kubebuilder:webhook:path=/validate-flexsite-io-v1alpha1-asset,mutating=false,failurePolicy=fail,sideEffects=None,groups=flexsite.io,resources=assets,verbs=create;update,versions=v1alpha1,name=vasset.flexsite.io,admissionReviewVersions=v1

type assetValidator struct {
	*lookups
	now func() time.Time
}

// ValidateCreate also checks the asset's references: its site must exist, and its external
// id must be free in the organisation.
func (v *assetValidator) ValidateCreate(ctx context.Context, asset *flexv1.Asset) (admission.Warnings, error) {
	spec := field.NewPath("spec")
	errs := AssetSpecErrors(&asset.Spec, nil, spec, v.now())
	site, err := v.site(ctx, asset.Namespace, asset.Spec.SiteName)
	if err != nil {
		return nil, err
	}
	if site == nil || !site.DeletionTimestamp.IsZero() {
		errs = append(errs, field.NotFound(spec.Child("siteName"), asset.Spec.SiteName))
	} else {
		live, err := v.liveAssets(ctx, site)
		if err != nil {
			return nil, err
		}
		if full := household.AssetsFit(live, 1); full != nil {
			errs = append(errs, field.Forbidden(spec.Child("siteName"), full.Error()))
		}
	}
	taken, err := v.externalIDTaken(ctx, asset)
	if err != nil {
		return nil, err
	}
	if taken != "" {
		errs = append(errs, field.Invalid(spec.Child("externalID"), asset.Spec.ExternalID,
			fmt.Sprintf("external ID is already used in this organisation by Asset %q", taken)))
	}
	if err := invalid("Asset", asset.Name, errs); err != nil {
		return nil, err
	}
	return v.warnings(ctx, asset)
}

// liveAssets counts the site's live assets (in the cache), which household.AssetsFit bounds:
// one past what its status can list would leave the site never evaluated.
func (v *assetValidator) liveAssets(ctx context.Context, site *flexv1.Site) (int, error) {
	assets, err := index.NewLookup(v.cache).AssetsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return 0, err
	}
	live := 0
	for _, a := range assets {
		if a.DeletionTimestamp.IsZero() {
			live++
		}
	}
	return live, nil
}

// ValidateUpdate checks the fields only: a site may be going away while its assets are
// still updated (by their controller, say), and siteName and externalID cannot change.
func (v *assetValidator) ValidateUpdate(ctx context.Context, old, asset *flexv1.Asset) (admission.Warnings, error) {
	if err := invalid("Asset", asset.Name, AssetSpecErrors(&asset.Spec, &old.Spec, field.NewPath("spec"), v.now())); err != nil {
		return nil, err
	}
	return v.warnings(ctx, asset)
}

func (v *assetValidator) ValidateDelete(context.Context, *flexv1.Asset) (admission.Warnings, error) {
	return nil, nil
}

// AssetSpecErrors checks an asset's fields with the domain rules. On an update (old not nil)
// the free text is checked only when it changes.
func AssetSpecErrors(spec, old *flexv1.AssetSpec, path *field.Path, now time.Time) field.ErrorList {
	var errs field.ErrorList
	for _, t := range []struct {
		name      string
		val, prev string
	}{
		{"externalID", spec.ExternalID, oldOr(old, func(o *flexv1.AssetSpec) string { return o.ExternalID })},
		{"model", spec.Model, oldOr(old, func(o *flexv1.AssetSpec) string { return o.Model })},
		{"serialNumber", spec.SerialNumber, oldOr(old, func(o *flexv1.AssetSpec) string { return o.SerialNumber })},
	} {
		errs = append(errs, textErrors(path.Child(t.name), t.val, t.prev, old != nil)...)
	}
	if spec.InstallationDate != "" {
		if err := validation.ValidateInstallationDate(spec.InstallationDate, now); err != nil {
			errs = append(errs, field.Invalid(path.Child("installationDate"), spec.InstallationDate, err.Error()))
		}
	}
	return errs
}

// warnings tells, without refusing, about an asset model the catalogue does not know: the
// asset is stored and its site's status reports asset_model_not_found until the model is
// added (a GitOps sync may apply the catalogue after the asset). The REST API refuses the
// same unknown model with a 404: a client that names a model expects it to exist now.
func (v *assetValidator) warnings(ctx context.Context, asset *flexv1.Asset) (admission.Warnings, error) {
	if asset.Spec.Model == "" {
		return nil, nil
	}
	rules, err := householdstore.LoadRules(ctx, v.cache)
	if err != nil {
		return nil, err
	}
	if _, known := rules.Model(asset.Spec.Model); known {
		return nil, nil
	}
	return admission.Warnings{fmt.Sprintf("spec.model: asset model %q is not in the catalogue; "+
		"the asset cannot qualify through asset-level metering until it is", asset.Spec.Model)}, nil
}

func (v *assetValidator) externalIDTaken(ctx context.Context, asset *flexv1.Asset) (string, error) {
	others, err := index.NewLookup(v.cache).AssetsByExternalID(ctx, asset.Namespace, asset.Spec.ExternalID)
	if err != nil {
		return "", err
	}
	for _, other := range others {
		if other.Name != asset.Name && other.DeletionTimestamp.IsZero() {
			return other.Name, nil
		}
	}
	return "", nil
}

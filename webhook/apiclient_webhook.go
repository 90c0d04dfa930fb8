package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/tenancy"
	"github.com/flexsite/flexsite/internal/validation"
)

// The webhook writes a UsernameClaim when it admits a client, so its side effects are none
// on dry run only (it then writes nothing).
// +kubebuilder:webhook:path=/validate-flexsite-io-v1alpha1-apiclient,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=flexsite.io,resources=apiclients,verbs=create;update,versions=v1alpha1,name=vapiclient.flexsite.io,admissionReviewVersions=v1
// +kubebuilder:rbac:groups=flexsite.io,resources=usernameclaims,verbs=get;create;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=apiclients,verbs=get;list

// apiClientValidator keeps usernames unique across organisations (internal/tenancy): a
// client is admitted only with the UsernameClaim of its username, and only when no other
// client, in any namespace, holds the username. The claims are read from the API server, not
// the cache, so that two clients created a moment apart are caught; the clients holding the
// username are found in the cache and read by GET (tenancy.ClaimUsername), not by a LIST.
type apiClientValidator struct {
	client client.Client
	cache  client.Reader
	api    client.Reader
	now    func() time.Time
}

func (v *apiClientValidator) ValidateCreate(ctx context.Context, c *flexv1.APIClient) (admission.Warnings, error) {
	if err := redirectURIs(c); err != nil {
		return nil, err
	}
	return nil, v.claim(ctx, c)
}

// ValidateUpdate checks the redirect URIs when they or the schemes change, and a change of
// username: a client keeps the username it holds, so that one of two clients that share a
// name from before the webhook existed can still be disabled or renamed.
func (v *apiClientValidator) ValidateUpdate(ctx context.Context, old, c *flexv1.APIClient) (admission.Warnings, error) {
	if !slices.Equal(old.Spec.RedirectURIs, c.Spec.RedirectURIs) || !slices.Equal(old.Spec.RedirectSchemes, c.Spec.RedirectSchemes) {
		if err := redirectURIs(c); err != nil {
			return nil, err
		}
	}
	if old.Spec.Username == c.Spec.Username {
		return nil, nil
	}
	return nil, v.claim(ctx, c)
}

// redirectURIs refuses a registered redirect URI that no device authorisation could name:
// each must pass validation.RedirectURI (https, http to a loopback host, or one of the
// client's own spec.redirectSchemes), the rule the REST API applies to a redirect_uri.
func redirectURIs(c *flexv1.APIClient) error {
	var errs field.ErrorList
	for i, u := range c.Spec.RedirectURIs {
		if _, err := validation.RedirectURI(u, c.Spec.RedirectSchemes); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "redirectURIs").Index(i), u, err.Error()))
		}
	}
	return invalid("APIClient", c.Name, errs)
}

func (v *apiClientValidator) ValidateDelete(context.Context, *flexv1.APIClient) (admission.Warnings, error) {
	return nil, nil
}

func (v *apiClientValidator) claim(ctx context.Context, c *flexv1.APIClient) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return err
	}
	dryRun := req.DryRun != nil && *req.DryRun
	err = tenancy.ClaimUsername(ctx, v.client, v.api, index.NewFreshLookup(v.cache, v.api), c, v.now(), dryRun)
	var taken *tenancy.UsernameTakenError
	if !errors.As(err, &taken) {
		return err
	}
	// Another organisation's client is not named: who uses which username is theirs to know.
	msg := "username is already used by another API client (usernames are unique across organisations)"
	switch {
	case taken.Holder.Namespace == c.Namespace:
		msg = fmt.Sprintf("username is already used by APIClient %q", taken.Holder.Name)
	case taken.Pending:
		msg = "username is being taken by another API client at this moment (usernames are unique across organisations)"
	}
	return invalid("APIClient", c.Name, field.ErrorList{field.Invalid(field.NewPath("spec", "username"), c.Spec.Username, msg)})
}

package app

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/validation"
)

// RedirectURI checks the redirect_uri a caller names (the rewards link's, a device
// authorisation's) by validation.RedirectURI, the one rule: https (http only to a loopback
// host), or a private-use scheme its API client declares (spec.redirectSchemes). It answers
// the URI normalised, or Invalid at ["query", "redirect_uri"] saying why. The API client is
// read (from cache: one Get) only for a private-use scheme, the one case where its schemes
// decide.
func RedirectURI(ctx context.Context, cache client.Reader, p *auth.Principal, raw string) (string, error) {
	norm, err := validation.RedirectURI(raw, nil)
	if validation.NeedsAppSchemes(err) {
		cl := &flexv1.APIClient{}
		switch gerr := cache.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.ClientName}, cl); {
		case apierrors.IsNotFound(gerr): // no client, no schemes: the refusal stands
		case gerr != nil:
			return "", gerr
		default:
			norm, err = validation.RedirectURI(raw, cl.Spec.RedirectSchemes)
		}
	}
	if err != nil {
		var v *validation.Error
		if !errors.As(err, &v) {
			return "", err
		}
		return "", InvalidFields(Field(v.Msg, v.Type, "query", "redirect_uri"))
	}
	return norm, nil
}

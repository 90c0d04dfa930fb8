package householdstore

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/validation"
)

// MaxFlexRate is the highest rate an organisation's flex events may pay, in hundredths of a
// penny per kWh: its namespace's flexv1.MaxFlexRateAnnotation (validation.OrganisationMaxFlexRate
// reads it). The namespace is read from cache, and from api when the cache has not seen it; a
// namespace that does not exist gets the default.
func MaxFlexRate(ctx context.Context, cache, api client.Reader, namespace string) (int64, error) {
	ns := &corev1.Namespace{}
	err := cache.Get(ctx, client.ObjectKey{Name: namespace}, ns)
	if apierrors.IsNotFound(err) && api != nil {
		err = api.Get(ctx, client.ObjectKey{Name: namespace}, ns)
	}
	if apierrors.IsNotFound(err) {
		return validation.DefaultMaxFlexRateCentipence, nil
	}
	if err != nil {
		return 0, err
	}
	v, ok := ns.Annotations[flexv1.MaxFlexRateAnnotation]
	return validation.OrganisationMaxFlexRate(v, ok), nil
}

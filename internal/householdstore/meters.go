package householdstore

import (
	"context"
	"math"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/index"
)

// BoundaryMeterIDs are the API ids of a site's boundary meters, sorted: whose readings are the
// site's energy when it has any (docs/platform.md, "How a site is settled").
func BoundaryMeterIDs(ctx context.Context, r client.Reader, namespace, siteName string) ([]string, error) {
	assets, err := index.NewLookup(r).AssetsOfSite(ctx, namespace, siteName)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, a := range assets {
		if a.Spec.Type != flexv1.AssetTypeBoundaryMeter {
			continue
		}
		if id := a.Labels[flexv1.IDLabel]; id != "" {
			out = append(out, id)
		} else {
			out = append(out, a.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// RatedPowerW is the sum of the power ratings (spec.powerW) of a site's live assets, in W:
// what settlement.PlausiblePowerW bounds the site's readings and credits by. Zero when none
// declares a rating. The sum is held at MaxInt64 rather than wrapped.
func RatedPowerW(ctx context.Context, r client.Reader, namespace, siteName string) (int64, error) {
	assets, err := index.NewLookup(r).AssetsOfSite(ctx, namespace, siteName)
	if err != nil {
		return 0, err
	}
	var sum int64
	for _, a := range assets {
		if !a.DeletionTimestamp.IsZero() || a.Spec.PowerW == nil || *a.Spec.PowerW <= 0 {
			continue
		}
		if sum > math.MaxInt64-*a.Spec.PowerW {
			return math.MaxInt64, nil
		}
		sum += *a.Spec.PowerW
	}
	return sum, nil
}

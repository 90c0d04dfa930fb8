package household

import (
	"slices"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// An asset may be deleted while the site it belongs to still carries the in-flight marker of
// the request that created both: the request has answered, but the Site controller has not
// evaluated the site yet. The marker names the asset, so the controller would wait for an
// asset that is gone for good, then take the complete site for a half-written one and delete
// it with everything of it. A door that deletes an asset therefore releases it from the
// marker first: the request did write it, and nobody need wait for it any more.

// ReleaseInFlightAsset drops the asset named assetName from the site's in-flight marker, when
// that marker still binds the site at now (CheckInFlight would act on it) and names the
// asset. It reports whether it changed the site, which then needs writing before the asset
// is deleted.
func ReleaseInFlightAsset(site *flexv1.Site, assetName string, now time.Time) bool {
	m, ok := MarkerOf(site, now)
	if !ok {
		return false
	}
	i := slices.Index(m.Assets, assetName)
	if i < 0 {
		return false
	}
	m.Assets = slices.Delete(m.Assets, i, i+1)
	m.Mark(site)
	return true
}

package household

import (
	"fmt"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// A site holds at most flexv1.MaxSiteAssets live assets: its status lists every asset's
// eligibility and holds no more, and a site whose status cannot be written is never evaluated
// (its eligibility reads wait, its enrolments stay pending). An onboard brings at most that many
// at once; this rule keeps later additions, through any door, within it.

// TooManyAssetsError refuses an asset that would take its site past flexv1.MaxSiteAssets.
type TooManyAssetsError struct {
	// Live is how many live assets the site holds, Adding how many the change adds.
	Live, Adding int
}

func (e *TooManyAssetsError) Error() string {
	return fmt.Sprintf("A site holds at most %d assets; this one has %d, and %d more would not fit",
		flexv1.MaxSiteAssets, e.Live, e.Adding)
}

// AssetsFit reports, as a TooManyAssetsError, whether adding assets to a site that holds live
// ones (assets on their way out do not count) would take it past flexv1.MaxSiteAssets.
func AssetsFit(live, adding int) error {
	if adding > 0 && live+adding > flexv1.MaxSiteAssets {
		return &TooManyAssetsError{Live: live, Adding: adding}
	}
	return nil
}

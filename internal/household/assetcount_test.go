package household

import (
	"errors"
	"testing"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func TestAssetsFit(t *testing.T) {
	cases := []struct {
		live, adding int
		fits         bool
	}{
		{0, flexv1.MaxSiteAssets, true},
		{flexv1.MaxSiteAssets - 1, 1, true},
		{flexv1.MaxSiteAssets, 1, false},
		{1, flexv1.MaxSiteAssets, false},
		{flexv1.MaxSiteAssets + 5, 0, true}, // adding nothing never refuses (an update, a repeat)
	}
	for _, c := range cases {
		err := AssetsFit(c.live, c.adding)
		var tooMany *TooManyAssetsError
		if got := !errors.As(err, &tooMany); got != c.fits {
			t.Errorf("AssetsFit(%d, %d) = %v, want fits %v", c.live, c.adding, err, c.fits)
		}
	}
}

package dispatch_test

import (
	"testing"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/dispatch"
)

func TestPlugEvents(t *testing.T) {
	for _, tc := range []struct {
		t    flexv1.AssetType
		want bool
	}{
		{flexv1.AssetTypeCharger, true}, {flexv1.AssetTypeElectricVehicle, true},
		{flexv1.AssetTypeHeatPump, false}, {flexv1.AssetTypeBattery, false}, {flexv1.AssetTypeHotWaterTank, false},
		{flexv1.AssetTypeBoundaryMeter, false}, {"", false},
	} {
		if got := dispatch.PlugEvents(tc.t); got != tc.want {
			t.Errorf("%q: %v", tc.t, got)
		}
	}
}

package dispatch

import flexv1 "github.com/flexsite/flexsite/api/v1alpha1"

// PlugEvents tells whether an asset of type t reports plug, intent and charge-now events
// (docs/api.md, "Asset events: what the devices tell Flexsite"): a charger and an electric vehicle
// are plugged in and charged; a heat pump, a battery or a meter never is, so such an event
// about one is a client's mistake (422), not a state dispatch could read.
func PlugEvents(t flexv1.AssetType) bool {
	return t == flexv1.AssetTypeCharger || t == flexv1.AssetTypeElectricVehicle
}

// Package units converts between the REST API's kilo-units and the resources' whole units.
// The API speaks kW and kWh as JSON numbers (power_kw, capacity_kwh, flex_kwh); the
// resources store whole watts and watt-hours as integers (powerW, capacityWh, flexWh), which
// round-trip exactly where floats would not. This is the one place the two meet.
package units

import "math"

// MaxKilo is the largest kilo-value (kW, kWh) whose whole units (W, Wh) fit in an int64
// with room to spare. Requests above it are refused rather than stored as something else.
const MaxKilo = 9e15

// FromKilo converts kW to W, or kWh to Wh, rounding to the nearest whole unit (halves away
// from zero). nil stays nil. Values beyond ±MaxKilo (which requests never get through) are
// held at that bound, so the conversion never overflows.
func FromKilo(kilo *float64) *int64 {
	if kilo == nil {
		return nil
	}
	k := math.Max(-MaxKilo, math.Min(MaxKilo, *kilo))
	u := int64(math.Round(k * 1000))
	return &u
}

// ToKilo converts W to kW, or Wh to kWh. nil stays nil.
func ToKilo(units *int64) *float64 {
	if units == nil {
		return nil
	}
	k := float64(*units) / 1000
	return &k
}

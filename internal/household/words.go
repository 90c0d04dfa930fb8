package household

import (
	"fmt"
	"math"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/settlement"
)

// The household's words: what both of its doors, the hosted flow (internal/hostedflow) and
// the rewards page (internal/rewardspage), call a transaction and how they write a day, so
// that the same credit reads the same on both.

// TransactionWords describes a reward transaction to its household: its type and, for a
// withdrawal, the state of its payment.
func TransactionWords(typ, paymentStatus string) string {
	switch typ {
	case "flex period":
		return "Reward for flexibility"
	case "flex period top-up":
		return "Reward for flexibility (top-up)"
	case "flex event":
		return "Flexibility event reward"
	case "signup bonus":
		return "Welcome bonus"
	case "goodwill credit":
		return "Goodwill credit"
	case "correction":
		return "Correction"
	case "invoice paid":
		return "Paid to your bill"
	case "withdrawal":
		switch paymentStatus {
		case "pending_approval", "approved", "processing":
			return "Withdrawal (in progress)"
		case "posted":
			return "Withdrawal (paid)"
		case "failed", "rejected", "cancelled", "returned":
			return "Withdrawal (not paid, returned to your balance)"
		}
		return "Withdrawal"
	default:
		return "Reward"
	}
}

// Day writes the UK local day of t as the household reads it, "1 July 2026": in
// settlement.London, the zone its credits are settled in, so a credit of a summer evening
// (23:30 UTC on 30 June is 00:30 on 1 July in the UK) shows on the day it was earned. A
// calendar date without a time (a settlement date) is its midnight UTC, which is the same day
// in the UK.
func Day(t time.Time) string { return t.In(settlement.London).Format("2 January 2006") }

// TransactionDay is the day a household's history shows a transaction on, from its record
// (start_time, RFC 3339, and settlement_date, YYYY-MM-DD, as the REST API answers them): the
// UK day of when it happened (TransactionAt); a settlement date that is not a date as it is,
// and "" when it has neither.
func TransactionDay(startTime *string, settlementDate string) string {
	var start *time.Time
	if startTime != nil {
		if at, err := time.Parse(time.RFC3339, *startTime); err == nil {
			start = &at
		}
	}
	if at := TransactionAt(start, settlementDate); !at.IsZero() {
		return Day(at)
	}
	return settlementDate
}

// DeviceWords names an asset type as a household calls its device, in a sentence: "charger",
// "electric vehicle", "heat pump", "hot water tank", "battery"; "device" for any other type,
// or none (an asset deleted since).
func DeviceWords(t flexv1.AssetType) string {
	switch t {
	case flexv1.AssetTypeCharger:
		return "charger"
	case flexv1.AssetTypeElectricVehicle:
		return "electric vehicle"
	case flexv1.AssetTypeHeatPump:
		return "heat pump"
	case flexv1.AssetTypeHotWaterTank:
		return "hot water tank"
	case flexv1.AssetTypeBattery:
		return "battery"
	}
	return "device"
}

// DispatchWords says what a device of type t did when it executed a dispatch at levelKW (its
// power output: positive giving power to the home, negative drawing it, as the DispatchEvent
// spells it) from from to to: "Your charger was paused from 17:30 to 18:30", in UK local time
// (the event's day is written beside it, with Day). A load asked for 0 kW was paused; a load
// asked to draw power charged (a charger, an electric vehicle) or was turned up (a heat pump, a
// hot water tank); a battery giving power was discharged, one drawing power was charged. A
// device of unknown type is worded from its level alone. While the window lasts (ongoing) it
// says what the device is doing: "Your charger is paused until 18:30". A window that has not
// started is no one's to word: nothing was done yet.
func DispatchWords(t flexv1.AssetType, levelKW float64, from, to time.Time, ongoing bool) string {
	const watt = 0.001 // the smallest level a dispatch carries: below it is 0 kW
	var did, does string
	switch {
	case math.Abs(levelKW) < watt:
		did, does = "was paused", "is paused"
	case t == flexv1.AssetTypeBattery && levelKW > 0:
		did, does = "was discharged", "is discharging"
	case t == flexv1.AssetTypeBattery:
		did, does = "was charged", "is charging"
	case levelKW > 0:
		did, does = "gave power to your home", "is giving power to your home"
	case t == flexv1.AssetTypeCharger || t == flexv1.AssetTypeElectricVehicle:
		did, does = "charged", "is charging"
	default:
		did, does = "was turned up", "is turned up"
	}
	if ongoing {
		return fmt.Sprintf("Your %s %s until %s", DeviceWords(t), does, clock(to))
	}
	return fmt.Sprintf("Your %s %s from %s to %s", DeviceWords(t), did, clock(from), clock(to))
}

// clock writes the UK local time of day of t, "17:30".
func clock(t time.Time) string { return t.In(settlement.London).Format("15:04") }

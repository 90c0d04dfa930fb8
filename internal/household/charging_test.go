package household

import (
	"testing"
	"time"
)

func TestChargingWindowSentence(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	b := func(from, to string) ChargingBlock { return ChargingBlock{Start: at(from), End: at(to)} }
	evening := at("2027-01-14T20:00:00Z")
	cases := []struct {
		name     string
		blocks   []ChargingBlock
		cheapest bool
		now      time.Time
		want     string
	}{
		{"one block after midnight", []ChargingBlock{b("2027-01-15T01:00:00Z", "2027-01-15T04:30:00Z")}, true, evening,
			"Your car will charge tomorrow 01:00–04:30, when energy is cheapest"},
		{"the same block seen after midnight", []ChargingBlock{b("2027-01-15T01:00:00Z", "2027-01-15T04:30:00Z")}, true,
			at("2027-01-15T00:10:00Z"), "Your car will charge 01:00–04:30, when energy is cheapest"},
		{"tonight, then past midnight", []ChargingBlock{b("2027-01-14T23:00:00Z", "2027-01-14T23:30:00Z"),
			b("2027-01-15T01:00:00Z", "2027-01-15T02:00:00Z"), b("2027-01-15T03:00:00Z", "2027-01-15T03:30:00Z")}, true, evening,
			"Your car will charge 23:00–23:30, tomorrow 01:00–02:00 and 03:00–03:30, when energy is cheapest"},
		{"ended blocks are left out", []ChargingBlock{b("2027-01-14T18:00:00Z", "2027-01-14T19:00:00Z"),
			b("2027-01-14T21:00:00Z", "2027-01-14T21:30:00Z")}, true, evening, "Your car will charge 21:00–21:30, when energy is cheapest"},
		{"nothing to come", []ChargingBlock{b("2027-01-14T18:00:00Z", "2027-01-14T19:00:00Z")}, true, evening, ""},
		{"unchanged: no claim about price", []ChargingBlock{b("2027-01-14T22:00:00Z", "2027-01-14T23:00:00Z")}, false, evening,
			"Your car will charge 22:00–23:00"},
		{"summer: UK time", []ChargingBlock{b("2027-07-15T00:00:00Z", "2027-07-15T03:30:00Z")}, true, at("2027-07-14T19:00:00Z"),
			"Your car will charge tomorrow 01:00–04:30, when energy is cheapest"},
		{"two days on", []ChargingBlock{b("2027-01-16T01:00:00Z", "2027-01-16T02:00:00Z")}, true, evening,
			"Your car will charge on Saturday 01:00–02:00, when energy is cheapest"},
		{"beyond the week", []ChargingBlock{b("2027-01-22T01:00:00Z", "2027-01-22T02:00:00Z")}, true, evening,
			"Your car will charge on 22 January 01:00–02:00, when energy is cheapest"},
	}
	for _, c := range cases {
		if got := ChargingWindowSentence(c.blocks, c.cheapest, c.now); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

package meters_test

import (
	"errors"
	"slices"
	"sort"
	"testing"

	"github.com/flexsite/flexsite/internal/meters"
)

func TestAddress(t *testing.T) {
	for _, c := range []struct {
		point meters.Point
		want  string
	}{
		{meters.Point{AddressLines: [4]string{"12 High Street"}, Town: "London", Postcode: "SW1A 1AA"},
			"12 High Street, London, SW1A 1AA"},
		{meters.Point{AddressLines: [4]string{"Flat 3", "Rose Court", "12 High Street"}, Town: "London", Postcode: "SW1A 1AA"},
			"Flat 3, Rose Court, 12 High Street, London, SW1A 1AA"},
		{meters.Point{AddressLines: [4]string{"The Old Barn", "", "  ", "Mill Lane"}, Town: " ", Postcode: "EX1 1AA"},
			"The Old Barn, Mill Lane, EX1 1AA"},
		{meters.Point{AddressLines: [4]string{" 1 A Road "}, Town: " Leeds ", Postcode: "LS1 1AA"},
			"1 A Road, Leeds, LS1 1AA"},
		{meters.Point{Postcode: "M1 1AE"}, "M1 1AE"},
	} {
		if got := c.point.Address(); got != c.want {
			t.Errorf("Address() = %q, want %q", got, c.want)
		}
	}
}

func TestEligibleMarkets(t *testing.T) {
	for _, c := range []struct {
		halfHourly bool
		want       []meters.Market
	}{
		{false, []meters.Market{meters.MarketDNO}},
		{true, []meters.Market{meters.MarketDNO, meters.MarketWholesale, meters.MarketCM}},
	} {
		if got := (meters.Point{HalfHourlySettled: c.halfHourly}).EligibleMarkets(); !slices.Equal(got, c.want) {
			t.Errorf("half-hourly %v: %v, want %v", c.halfHourly, got, c.want)
		}
	}
}

func TestSortKeyIsNaturalOrder(t *testing.T) {
	// Each list is in natural order; sorting it by SortKey must keep it so.
	for _, ordered := range [][]string{
		{"2 High Street", "10 High Street", "100 High Street"},
		{"Flat 1", "Flat 2", "Flat 9", "Flat 10", "Flat 11"},
		{"10 High Street", "10A High Street", "10B High Street", "11 High Street"},
		{"Flat 9, Rose Court", "Flat 10, Rose Court", "Flat 10A, Rose Court"},
		{"1 high street", "2 High Street", "3 HIGH STREET"},
		{"Ivy Cottage", "Rose Cottage", "The Old Barn"},
		{"Zed House", "Élan House", "ÿ House"}, // beyond ASCII, code point order (the register's collation "C")
		{"0 Road", "7 Road", "08 Road", "9 Road"},
	} {
		got := slices.Clone(ordered)
		slices.Reverse(got)
		sort.SliceStable(got, func(i, j int) bool { return meters.SortKey(got[i]) < meters.SortKey(got[j]) })
		if !slices.Equal(got, ordered) {
			t.Errorf("sorted by SortKey: %q, want %q", got, ordered)
		}
	}
	for _, c := range []struct{ a, b string }{
		{"007 Road", "7 road"},       // leading zeros and case are not an order
		{"Flat 04", "flat 4"},        //
		{"ÉLAN HOUSE", "élan house"}, // lower-cased beyond ASCII
	} {
		if meters.SortKey(c.a) != meters.SortKey(c.b) {
			t.Errorf("SortKey(%q) = %q, SortKey(%q) = %q: want them equal", c.a, meters.SortKey(c.a), c.b, meters.SortKey(c.b))
		}
	}
}

func TestMatchesBuilding(t *testing.T) {
	house := func(lines ...string) meters.Point {
		var p meters.Point
		copy(p.AddressLines[:], lines)
		return p
	}
	for _, c := range []struct {
		identifier string
		point      meters.Point
		want       bool
	}{
		{"3", house("3 High Street"), true},
		{"3", house("3A High Street"), true}, // a number names its lettered houses
		{"10", house("10A High Street"), true},
		{"10a", house("10A High Street"), true},
		{"10A", house("10 High Street"), false},
		{"10B", house("10A High Street"), false},
		{"1", house("10 High Street"), false}, // but no longer number
		{"1", house("1 High Street"), true},
		{"12 High Street", house("12 High Street"), true},
		{"12, high st", house("12 High Street"), true}, // a prefix, punctuation aside
		{"12 High Road", house("12 High Street"), false},
		{"Flat 4", house("Flat 4", "Rose Court", "12 High Street"), true},
		{"flat 4", house("Flat 40", "Rose Court", "12 High Street"), false},
		{"Flat 40", house("Flat 4", "Rose Court", "12 High Street"), false},
		{"Rose Court", house("Flat 4", "Rose Court", "12 High Street"), true}, // any line
		{"12", house("Flat 4", "Rose Court", "12 High Street"), true},
		{"The Old Barn", house("The Old Barn", "Mill Lane"), true},
		{"the old barn", house("The Old Barn", "Mill Lane"), true},
		{"Old Barn", house("The Old Barn", "Mill Lane"), true}, // "The" dropped
		{"The Rose Cottage", house("Rose Cottage", "Mill Lane"), true},
		{"Old", house("The Old Barn", "Mill Lane"), true},
		{"Barn", house("The Old Barn", "Mill Lane"), false},        // not a prefix
		{"Rose Cotage", house("Rose Cottage", "Mill Lane"), true},  // one edit
		{"Rose Cottge", house("Rose Cottage", "Mill Lane"), true},  //
		{"Rsoe Cottage", house("Rose Cottage", "Mill Lane"), true}, // two edits beyond eight letters
		{"Rsoe Cotage", house("Rose Cottage", "Mill Lane"), false}, // three
		{"Rose Cotage 2", house("Rose Cottage 2", "Mill Lane"), true},
		{"Rose Cotage 3", house("Rose Cottage 2", "Mill Lane"), false}, // a number is never misspelt
		{"Flat 4 Rose Crt", house("Flat 4 Rose Court"), true},
		{"Flat 4 Rose Crt", house("Flat 14 Rose Court"), false},
		{"Ivy Cottage", house("Rose Cottage", "Mill Lane"), false},
		{"Rose Cot", house("Rose Cottage", "Mill Lane"), true}, // a prefix
		{"Rose Cott", house("Rose Court"), true},               // a close spelling ending at a word
		{"Mil", house("Mill Lane"), true},
		{"Mll", house("Mill Lane"), false}, // names of under four letters are spelt right
		{"Hil", house("Hill House"), true},
		{"", house("3 High Street"), true}, // no identifier: every building
		{"   ", house("3 High Street"), true},
		{"%", house("3 High Street"), false}, // not a wildcard
		{"_", house("3 High Street"), false},
		{"'", house("3 High Street"), false},
		{`\`, house("3 High Street"), false},
		{"%%", house("3 High Street"), false},
		{"3%", house("3 High Street"), true}, // its words are "3": punctuation aside
		{"' OR 1=1 --", house("3 High Street"), false},
		{"3", house(), false},
	} {
		if got := c.point.MatchesBuilding(c.identifier); got != c.want {
			t.Errorf("%q names %q: %v, want %v", c.identifier, c.point.AddressLines, got, c.want)
		}
	}
}

func TestPostcodeIn(t *testing.T) {
	for _, c := range []struct {
		address, want string
	}{
		{"221B Baker Street, London, NW1 6XE", "NW1 6XE"},
		{"221B Baker Street, London NW1 6XE", "NW1 6XE"},
		{"221B Baker Street London NW16XE", "NW1 6XE"},
		{"221b baker street, london, nw1 6xe", "NW1 6XE"},
		{"221B Baker Street, London, NW1  6XE ", "NW1 6XE"},
		{"SW1A 1AA, 10 Downing Street, London", "SW1A 1AA"}, // in the middle
		{"Flat 3, Rose Court, 12 High Street, London SW1A1AA", "SW1A 1AA"},
		{"M1 1AE", "M1 1AE"},
		{"1 Road, M1 1AE, Manchester, SW1A 1AA", "SW1A 1AA"}, // the last one
	} {
		got, err := meters.PostcodeIn(c.address)
		if err != nil || got != c.want {
			t.Errorf("PostcodeIn(%q) = %q, %v; want %q", c.address, got, err, c.want)
		}
	}
	for _, address := range []string{"", "12 High Street, London", "12 High Street, London, SW1A", "ZZ99 9ZZZ",
		"1AA SW1A", "%", "' OR 1=1 --"} {
		if got, err := meters.PostcodeIn(address); !errors.Is(err, meters.ErrNoPostcode) {
			t.Errorf("PostcodeIn(%q) = %q, %v; want ErrNoPostcode", address, got, err)
		}
	}
}

func TestPick(t *testing.T) {
	a, b := meters.Point{MPAN: "a"}, meters.Point{MPAN: "b"}
	for _, c := range []struct {
		name   string
		ranked []meters.Candidate
		want   string // MPAN; "" is none
	}{
		{"no candidates", nil, ""},
		{"one below 0.6", []meters.Candidate{{a, 0.59}}, ""},
		{"one at 0.6", []meters.Candidate{{a, 0.6}}, "a"},
		{"one exact", []meters.Candidate{{a, 1}}, "a"},
		{"a lead under 0.1", []meters.Candidate{{a, 0.95}, {b, 0.86}}, ""},
		{"a tie", []meters.Candidate{{a, 1}, {b, 1}}, ""},
		{"a clear winner", []meters.Candidate{{a, 0.9}, {b, 0.5}, {b, 0.1}}, "a"},
		{"a lead of 0.1", []meters.Candidate{{a, 0.75}, {b, 0.625}}, "a"},
		{"a lead but too low", []meters.Candidate{{a, 0.5}, {b, 0.1}}, ""},
	} {
		got, err := meters.Pick(c.ranked)
		var none *meters.ErrNoUniqueMeter
		switch {
		case c.want == "" && (!errors.As(err, &none) || none.Candidates != len(c.ranked)):
			t.Errorf("%s: %+v, %v; want ErrNoUniqueMeter of %d candidates", c.name, got, err, len(c.ranked))
		case c.want != "" && (err != nil || got.MPAN != c.want):
			t.Errorf("%s: %+v, %v; want %s", c.name, got, err, c.want)
		}
	}
}

func TestTellingWords(t *testing.T) {
	for _, c := range []struct {
		name      string
		addresses []string
		given     string
		telling   []string
		query     string
	}{
		{"the shared street, town and postcode go",
			[]string{"2 High Street, London, SW1A 1AA", "4 High Street, London, SW1A 1AA", "The Old Barn, High Street, London, SW1A 1AA"},
			"4 High Street, London, SW1A 1AA",
			[]string{"2", "4", "the old barn"}, "4"},
		{"flats keep their number and block",
			[]string{"Flat 1, Rose Court, 12 High Street, London, SW1A 1AA", "Flat 2, Rose Court, 12 High Street, London, SW1A 1AA",
				"14 High Street, London, SW1A 1AA"},
			"flat 2, rose court, 12 high st, SW1A 1AA",
			[]string{"flat 1 rose court 12", "flat 2 rose court 12", "14"}, "flat 2 rose court 12"},
		{"a postcode typed without its space goes too",
			[]string{"2 High Street, London, SW1A 1AA", "4 High Street, London, SW1A 1AA"},
			"2 High Street London SW1A1AA", []string{"2", "4"}, "2"},
		{"one address: only its postcode goes",
			[]string{"The Old Barn, Mill Lane, Exeter, EX1 1AA"}, "Old Barn, Mill Lane, EX1 1AA",
			[]string{"the old barn mill lane exeter"}, "old barn mill lane"},
		{"words the register lacks stay before a telling one",
			[]string{"2 High Street, London, SW1A 1AA", "4 High Street, London, SW1A 1AA"},
			"Westminster 2 High Street, London, SW1A 1AA", []string{"2", "4"}, "westminster 2"},
		{"but not at the end, where they say where, not which",
			[]string{"2 High Street, London, SW1A 1AA", "4 High Street, London, SW1A 1AA"},
			"2 High St, Westminster, London, Greater London, SW1A 1AA, UK", []string{"2", "4"}, "2"},
		{"a number after the street stays",
			[]string{"2 High Street, London, SW1A 1AA", "4 High Street, London, SW1A 1AA"},
			"High Street 7, SW1A 1AA", []string{"2", "4"}, "7"},
		{"a name before the street stays though no address holds it",
			[]string{"The Old Barn, High Street, London, SW1A 1AA", "4 High Street, London, SW1A 1AA"},
			"The Old Rectory, High Street, London, SW1A 1AA", []string{"the old barn", "4"}, "the old rectory"},
		{"so does a name without a street",
			[]string{"Ivy Cottage, High Street, London, SW1A 1AA", "4 High Street, London, SW1A 1AA"},
			"Rose Cottage, SW1A 1AA", []string{"ivy cottage", "4"}, "rose cottage"},
		{"a sole address shares nothing: a county stays",
			[]string{"2 High Street, London, SW1A 1AA"},
			"2 High Street, London, Greater London, SW1A 1AA", []string{"2 high street london"}, "2 high street london greater london"},
		{"quotes and backslashes are not words",
			[]string{"2 High Street, London, SW1A 1AA", "4 High Street, London, SW1A 1AA"},
			`2' OR '1'='1 \ %, SW1A 1AA`, []string{"2", "4"}, "2 or 1 1"},
		{"no addresses", nil, "2 High Street, SW1A 1AA", []string{}, "2 high street"},
	} {
		telling, query := meters.TellingWords(c.addresses, "SW1A 1AA", c.given)
		if c.name == "one address: only its postcode goes" {
			telling, query = meters.TellingWords(c.addresses, "EX1 1AA", c.given)
		}
		if !slices.Equal(telling, c.telling) || query != c.query {
			t.Errorf("%s: %q, %q; want %q, %q", c.name, telling, query, c.telling, c.query)
		}
	}
}

func TestHasNumbersOf(t *testing.T) {
	for _, c := range []struct {
		telling, query string
		want           bool
	}{
		{"flat 2 mill house 5", "flat 2 mill house 5", true},
		{"flat 1 mill house 5", "flat 2 mill house 5", false},
		{"flat 2 mill house 5", "flat 2 mill house", true}, // the block's number left out
		{"flat 12 mill house", "flat 2 mill house", false},
		{"12a", "12", true}, // "12A" holds 12
		{"12", "12a", true}, // and the letter is left to the similarity
		{"14", "12", false},
		{"the old barn", "the old barn", true},
		{"the old barn", "", true},
		{"", "7", false},
		{"flat 2 riverside house 1", "flat 1 riverside house 1", false}, // 1 written twice
		{"flat 1 riverside house 1", "flat 1 riverside house 1", true},
		{"flat 1 riverside house 1", "flat 1 riverside house", true},
	} {
		if got := meters.HasNumbersOf(c.telling, c.query); got != c.want {
			t.Errorf("HasNumbersOf(%q, %q) = %v, want %v", c.telling, c.query, got, c.want)
		}
	}
}

package meters_test

import (
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/meters"
)

// validMPAN has a good check digit; validMPAN with its last digit changed has not.
const validMPAN = "1200023305967"

func TestReadHeader(t *testing.T) {
	for _, c := range []struct {
		name   string
		header []string
		errHas string // "" is accepted
	}{
		{"every column", meters.Columns, ""},
		{"any order, any case, spaces", []string{" Postcode", "HALF_HOURLY_SETTLED ", "town", "MPAN"}, ""},
		{"a spreadsheet's byte order mark", []string{"\ufeffmpan", "postcode", "half_hourly_settled"}, ""},
		{"an unknown column", []string{"mpan", "postcode", "half_hourly_settled", "county"}, `unknown column "county"`},
		{"a column twice", []string{"mpan", "postcode", "half_hourly_settled", "Postcode"}, `column "Postcode" is named twice`},
		{"no mpan", []string{"postcode", "half_hourly_settled"}, `no "mpan" column`},
		{"no postcode", []string{"mpan", "half_hourly_settled"}, `no "postcode" column`},
		{"no settlement", []string{"mpan", "postcode"}, `no "half_hourly_settled" column`},
		{"empty", nil, `no "mpan" column`},
	} {
		_, err := meters.ReadHeader(c.header)
		switch {
		case c.errHas == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.errHas != "" && (err == nil || !strings.Contains(err.Error(), c.errHas)):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.errHas)
		}
	}
}

func TestHeaderPoint(t *testing.T) {
	full, err := meters.ReadHeader(meters.Columns)
	if err != nil {
		t.Fatal(err)
	}
	row := func(change func(r []string)) []string {
		r := []string{validMPAN, "Flat 3", "Rose Court", "12 High Street", "", "London", "sw1a1aa", "OCTO", "Octopus Energy", "true"}
		if change != nil {
			change(r)
		}
		return r
	}
	got, err := full.Point(row(nil))
	want := meters.Point{MPAN: validMPAN, AddressLines: [4]string{"Flat 3", "Rose Court", "12 High Street"}, Town: "London",
		Postcode: "SW1A 1AA", SupplierMPID: "OCTO", SupplierName: "Octopus Energy", HalfHourlySettled: true}
	if err != nil || got != want {
		t.Fatalf("Point = %+v, %v; want %+v", got, err, want)
	}
	if again, err := full.Point(got.Record()); err != nil || again != got {
		t.Errorf("Point(Record()) = %+v, %v; want %+v", again, err, got)
	}

	for _, c := range []struct {
		name   string
		record []string
		errHas string
	}{
		{"an MPAN of 12 digits", row(func(r []string) { r[0] = validMPAN[:12] }), "mpan: MPAN must be exactly 13 digits"},
		{"an MPAN with a letter", row(func(r []string) { r[0] = "12000233059A7" }), "mpan: MPAN must be exactly 13 digits"},
		{"a bad check digit", row(func(r []string) { r[0] = validMPAN[:12] + "8" }), "mpan: MPAN check digit is invalid"},
		{"no MPAN", row(func(r []string) { r[0] = "" }), "mpan: MPAN must be exactly 13 digits"},
		{"no postcode", row(func(r []string) { r[6] = "  " }), "postcode: no postcode"},
		{"not a UK postcode", row(func(r []string) { r[6] = "90210" }), `postcode: "90210" is not a UK postcode`},
		{"a settlement flag neither yes nor no", row(func(r []string) { r[9] = "maybe" }), `half_hourly_settled: "maybe" is not true or false`},
		{"a field too long", row(func(r []string) { r[1] = strings.Repeat("x", meters.MaxFieldBytes+1) }), "field 2 is longer than 200 bytes"},
		{"not UTF-8", row(func(r []string) { r[5] = "Lond\xffon" }), "field 6 is not UTF-8"},
		{"a control character", row(func(r []string) { r[8] = "Octopus\x00Energy" }), "field 9: String should not contain control characters, found U+0000"},
		{"a line break", row(func(r []string) { r[2] = "Rose\nCourt" }), "field 3: String should not contain control characters"},
		{"a line separator", row(func(r []string) { r[2] = "Rose\u2028Court" }), "field 3: String should not contain control characters"},
	} {
		_, err := full.Point(c.record)
		if err == nil || !strings.Contains(err.Error(), c.errHas) {
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.errHas)
		}
	}

	// A field of exactly the bound, an MPAN with spaces, and every spelling of the flag.
	if p, err := full.Point(row(func(r []string) { r[1] = strings.Repeat("x", meters.MaxFieldBytes); r[0] = "12 0002 3305 967" })); err != nil ||
		p.MPAN != validMPAN {
		t.Errorf("a field of %d bytes and a spaced MPAN: %+v, %v", meters.MaxFieldBytes, p, err)
	}
	for flag, want := range map[string]bool{"true": true, "T": true, "yes": true, "Y": true, "1": true,
		"false": false, "f": false, "No": false, "n": false, "0": false, "": false, " TRUE ": true} {
		p, err := full.Point(row(func(r []string) { r[9] = flag }))
		if err != nil || p.HalfHourlySettled != want {
			t.Errorf("half_hourly_settled %q: %v, %v; want %v", flag, p.HalfHourlySettled, err, want)
		}
	}

	// A file of the required columns only, in its own order: the rest are empty.
	short, err := meters.ReadHeader([]string{"half_hourly_settled", "postcode", "mpan"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := short.Point([]string{"no", "M1 1AE", validMPAN})
	if err != nil || p != (meters.Point{MPAN: validMPAN, Postcode: "M1 1AE"}) {
		t.Errorf("the required columns only: %+v, %v", p, err)
	}
	// A row shorter than its header reads the missing fields as empty (the CSV reader refuses
	// such a row before it gets here; the rule does not depend on it).
	if _, err := full.Point([]string{validMPAN}); err == nil || !strings.Contains(err.Error(), "no postcode") {
		t.Errorf("a row of one field: %v", err)
	}
}

// FuzzHeaderPoint: any row is a point or a reason, never a panic; a point written back as a
// row reads as itself.
func FuzzHeaderPoint(f *testing.F) {
	f.Add(validMPAN, "Flat 3", "Rose Court", "London", "SW1A 1AA", "true")
	f.Add("", "\xff", "\x00", "", "sw1a1aa", "maybe")
	f.Add(validMPAN, strings.Repeat("é", 101), "", "", "GIR 0AA", "")
	h, err := meters.ReadHeader(meters.Columns)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, mpan, line1, line2, town, postcode, flag string) {
		p, err := h.Point([]string{mpan, line1, line2, "", "", town, postcode, "OCTO", "Octopus", flag})
		if err != nil {
			return
		}
		if again, err := h.Point(p.Record()); err != nil || again != p {
			t.Fatalf("Point(Record()) = %+v, %v; want %+v", again, err, p)
		}
	})
}

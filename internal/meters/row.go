package meters

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/flexsite/flexsite/internal/validation"
)

// Columns are the register file's columns (docs/platform.md, "The meter register"), in the order
// WriteRecord writes them; a file may order them as it likes, by its header row.
var Columns = []string{"mpan", "address_line_1", "address_line_2", "address_line_3", "address_line_4",
	"town", "postcode", "supplier_mpid", "supplier_name", "half_hourly_settled"}

// requiredColumns must be in every file's header: without them a row cannot be a meter point.
var requiredColumns = []string{"mpan", "postcode", "half_hourly_settled"}

// Header is where a file's header row put each column (-1: absent, read as empty).
type Header struct{ at [10]int }

// ReadHeader reads a register file's header row: every column named at most once, none
// unknown, and mpan, postcode and half_hourly_settled present.
func ReadHeader(record []string) (Header, error) {
	var h Header
	for i := range h.at {
		h.at[i] = -1
	}
	for i, name := range record {
		name = strings.TrimSpace(strings.TrimPrefix(name, "\ufeff")) // a spreadsheet's byte order mark
		c := slices.Index(Columns, strings.ToLower(name))
		switch {
		case c < 0:
			return Header{}, fmt.Errorf("unknown column %q (the columns are %s)", name, strings.Join(Columns, ", "))
		case h.at[c] >= 0:
			return Header{}, fmt.Errorf("column %q is named twice", name)
		}
		h.at[c] = i
	}
	for _, name := range requiredColumns {
		if h.at[slices.Index(Columns, name)] < 0 {
			return Header{}, fmt.Errorf("the header has no %q column", name)
		}
	}
	return h, nil
}

func (h Header) field(record []string, column int) string {
	if i := h.at[column]; i >= 0 && i < len(record) {
		return strings.TrimSpace(record[i])
	}
	return ""
}

// Point reads one row of the file as a meter point, or says why it cannot be one: an MPAN
// that is not 13 digits or whose check digit is wrong, no postcode or one that is not a UK
// postcode, a settlement flag that is not a yes or a no, a field too long, not UTF-8 or holding control characters.
func (h Header) Point(record []string) (Point, error) {
	for i, f := range record {
		if !utf8.ValidString(f) {
			return Point{}, fmt.Errorf("field %d is not UTF-8", i+1)
		}
		if len(f) > MaxFieldBytes {
			return Point{}, fmt.Errorf("field %d is longer than %d bytes", i+1, MaxFieldBytes)
		}
		if err := validation.SingleLineText(f); err != nil {
			return Point{}, fmt.Errorf("field %d: %w", i+1, err)
		}
	}
	var p Point
	mpan, err := validation.NormaliseMPAN(h.field(record, 0))
	if err != nil {
		return Point{}, fmt.Errorf("mpan: %w", err)
	}
	p.MPAN = mpan
	for i := range p.AddressLines {
		p.AddressLines[i] = h.field(record, 1+i)
	}
	p.Town = h.field(record, 5)
	raw := h.field(record, 6)
	if raw == "" {
		return Point{}, errors.New("postcode: no postcode")
	}
	if p.Postcode, err = validation.NormalisePostcode(raw); err != nil {
		return Point{}, fmt.Errorf("postcode: %q is not a UK postcode", raw)
	}
	p.SupplierMPID, p.SupplierName = h.field(record, 7), h.field(record, 8)
	if p.HalfHourlySettled, err = parseYesNo(h.field(record, 9)); err != nil {
		return Point{}, fmt.Errorf("half_hourly_settled: %w", err)
	}
	return p, nil
}

// parseYesNo reads a settlement flag as exports write it: true/false, t/f, yes/no, y/n, 1/0
// (any case); an empty field is no, since a register marks only its half-hourly points.
func parseYesNo(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "true", "t", "yes", "y", "1":
		return true, nil
	case "false", "f", "no", "n", "0", "":
		return false, nil
	}
	return false, fmt.Errorf("%q is not true or false", s)
}

// Record is the point as a row of the file, in Columns' order (the generator's and the
// tests').
func (p Point) Record() []string {
	hh := "false"
	if p.HalfHourlySettled {
		hh = "true"
	}
	return []string{p.MPAN, p.AddressLines[0], p.AddressLines[1], p.AddressLines[2], p.AddressLines[3],
		p.Town, p.Postcode, p.SupplierMPID, p.SupplierName, hh}
}

package synth_test

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"testing"

	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/meters/synth"
	"github.com/flexsite/flexsite/internal/validation"
)

var anchors = []string{"SW1A 1AA", "m11ae"}

func file(t *testing.T, seed uint64, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := synth.WriteCSV(&buf, seed, n, anchors); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestDeterministicBySeed(t *testing.T) {
	a, again, other := file(t, 1, 5000), file(t, 1, 5000), file(t, 2, 5000)
	if !bytes.Equal(a, again) {
		t.Error("one seed wrote two different registers")
	}
	if bytes.Equal(a, other) {
		t.Error("two seeds wrote one register")
	}
	// A longer register of the same seed begins with the shorter one's rows.
	if longer := file(t, 1, 6000); !bytes.HasPrefix(longer, a[:bytes.LastIndexByte(a[:len(a)-1], '\n')]) {
		t.Error("the first 5,000 of 6,000 points differ from the 5,000")
	}
}

// TestEveryPointIsARegisterRow reads a register of 200,000 as an import reads it: every row
// a meter point (meters.Header.Point: MPAN check digit, postcode, fields), the same point
// Generate made, every MPAN once, the anchors first, and no address twice at a postcode (two
// would be one address naming two meter points: by-address could never answer it).
func TestEveryPointIsARegisterRow(t *testing.T) {
	const n = 200_000
	var generated []meters.Point
	if err := synth.Generate(3, n, anchors, func(p meters.Point) error {
		generated = append(generated, p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(generated) != n {
		t.Fatalf("%d points, want %d", len(generated), n)
	}

	r := csv.NewReader(bytes.NewReader(file(t, 3, n)))
	record, err := r.Read()
	if err != nil {
		t.Fatal(err)
	}
	header, err := meters.ReadHeader(record)
	if err != nil {
		t.Fatal(err)
	}
	mpans := make(map[string]bool, n)
	addresses := make(map[string]bool, n)
	postcodes := map[string]int{}
	lastPostcode := ""
	for i := 0; ; i++ {
		record, err := r.Read()
		if errors.Is(err, io.EOF) {
			if i != n {
				t.Fatalf("%d rows, want %d", i, n)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p, err := header.Point(record)
		if err != nil {
			t.Fatalf("row %d %q: %v", i+2, record, err)
		}
		if p != generated[i] {
			t.Fatalf("row %d is %+v, Generate made %+v", i+2, p, generated[i])
		}
		if mpan, err := validation.NormaliseMPAN(p.MPAN); err != nil || mpan != p.MPAN {
			t.Fatalf("row %d: MPAN %q: %v", i+2, p.MPAN, err)
		}
		if pc, err := validation.NormalisePostcode(p.Postcode); err != nil || pc != p.Postcode {
			t.Fatalf("row %d: postcode %q is not normalised (%q, %v)", i+2, p.Postcode, pc, err)
		}
		if mpans[p.MPAN] {
			t.Fatalf("row %d: MPAN %s twice", i+2, p.MPAN)
		}
		mpans[p.MPAN] = true
		if addresses[p.Address()] {
			t.Fatalf("row %d: %q twice", i+2, p.Address())
		}
		addresses[p.Address()] = true
		if p.Postcode != lastPostcode {
			postcodes[p.Postcode]++
			if postcodes[p.Postcode] > 1 {
				t.Fatalf("row %d: postcode %s given a second street", i+2, p.Postcode)
			}
			lastPostcode = p.Postcode
		}
		if p.AddressLines[0] == "" || p.Town == "" || p.SupplierMPID == "" || p.SupplierName == "" {
			t.Fatalf("row %d: %+v lacks a field a register row has", i+2, p)
		}
	}
}

// TestAnchorsFirstAndEveryKind: the anchors are the first postcodes, each once, and the first
// postcodes already hold every kind of address (the walk-through finds flats and named houses).
func TestAnchorsFirstAndEveryKind(t *testing.T) {
	var generated []meters.Point
	if err := synth.Generate(3, 20_000, anchors, func(p meters.Point) error {
		generated = append(generated, p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	streets := map[string]int{}
	for i, p := range generated {
		if i == 0 || p.Postcode != generated[i-1].Postcode {
			streets[p.Postcode]++
		}
	}
	if streets["SW1A 1AA"] != 1 || streets["M1 1AE"] != 1 {
		t.Errorf("an anchor postcode was generated again")
	}
	// The anchors come first, a few meter points each.
	if generated[0].Postcode != "SW1A 1AA" {
		t.Errorf("the first point is at %s, want SW1A 1AA", generated[0].Postcode)
	}
	seen := []string{generated[0].Postcode}
	for _, p := range generated {
		if p.Postcode != seen[len(seen)-1] {
			seen = append(seen, p.Postcode)
			if len(seen) == 3 {
				break
			}
		}
	}
	if seen[1] != "M1 1AE" {
		t.Errorf("the second postcode is %s, want the anchor M1 1AE", seen[1])
	}
	// Every kind of address a register holds is there.
	kinds := map[string]bool{}
	for _, p := range generated[:2000] {
		line := p.AddressLines[0]
		switch {
		case len(line) > 5 && line[:5] == "Flat ":
			kinds["flat"] = true
		case line[0] >= '0' && line[0] <= '9':
			if i := bytes.IndexByte([]byte(line), ' '); line[i-1] >= 'A' {
				kinds["lettered"] = true
			} else {
				kinds["numbered"] = true
			}
		default:
			kinds["named"] = true
		}
	}
	if len(kinds) != 4 {
		t.Errorf("the first 2,000 points hold only %v addresses", kinds)
	}
}

func TestABadAnchorIsRefused(t *testing.T) {
	err := synth.Generate(1, 10, []string{"not a postcode"}, func(meters.Point) error { return nil })
	if err == nil {
		t.Error("an anchor that is not a postcode was taken")
	}
}

func TestYieldErrorStops(t *testing.T) {
	stop := errors.New("stop")
	calls := 0
	err := synth.Generate(1, 100, nil, func(meters.Point) error {
		calls++
		return stop
	})
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("Generate = %v after %d calls; want stop after 1", err, calls)
	}
}

package meterstore_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/meterstore"
	"github.com/flexsite/flexsite/internal/validation"
)

// freshRegister is a register of its own (a fresh database) holding points.
func freshRegister(t *testing.T, points ...meters.Point) *meterstore.Store {
	t.Helper()
	ctx := context.Background()
	database, err := dbtest.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close(context.Background()) })
	var file bytes.Buffer
	w := csv.NewWriter(&file)
	_ = w.Write(meters.Columns)
	for _, p := range points {
		_ = w.Write(p.Record())
	}
	w.Flush()
	s := &meterstore.Store{Pool: database.Pool}
	if _, err := s.Import(ctx, &file, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// mpanOf is the n-th of a run of valid MPANs.
func mpanOf(n int) string {
	first12 := fmt.Sprintf("19%010d", n)
	return first12 + fmt.Sprint(validation.MPANCheckDigit(first12))
}

// at is a meter point at postcode with address lines.
func at(n int, postcode string, lines ...string) meters.Point {
	p := meters.Point{MPAN: mpanOf(n), Town: "Exeter", Postcode: postcode, SupplierMPID: "OCTO", SupplierName: "Octopus Energy"}
	copy(p.AddressLines[:], lines)
	return p
}

func firstLines(points []meters.Point) []string {
	out := make([]string, len(points))
	for i, p := range points {
		out[i] = p.AddressLines[0]
	}
	return out
}

func TestAtPostcodeIsInNaturalOrderAndBounded(t *testing.T) {
	ctx := context.Background()
	s := freshRegister(t,
		at(1, "EX1 1AA", "10 High Street"), at(2, "EX1 1AA", "2 High Street"), at(3, "EX1 1AA", "Flat 10", "Rose Court"),
		at(4, "EX1 1AA", "Flat 9", "Rose Court"), at(5, "EX1 1AA", "10A High Street"), at(6, "EX1 1AA", "1 High Street"),
		at(7, "EX1 1AA", "The Old Barn", "High Street"), at(8, "EX1 1AB", "3 High Street"))

	points, err := s.AtPostcode(ctx, "EX1 1AA", meters.MaxSearchResults)
	want := []string{"1 High Street", "2 High Street", "10 High Street", "10A High Street", "Flat 9", "Flat 10", "The Old Barn"}
	if err != nil || !slices.Equal(firstLines(points), want) {
		t.Fatalf("AtPostcode = %q, %v; want %q", firstLines(points), err, want)
	}
	if points, err := s.AtPostcode(ctx, "EX1 1AA", 3); err != nil || !slices.Equal(firstLines(points), want[:3]) {
		t.Errorf("AtPostcode limit 3 = %q, %v; want %q", firstLines(points), err, want[:3])
	}
	for _, postcode := range []string{"EX1 1AC", "%", "EX1 1A_", "EX1 1A%", "ex1 1aa", "' OR '1'='1", `EX1 1AA\`, ""} {
		if points, err := s.AtPostcode(ctx, postcode, meters.MaxSearchResults); err != nil || len(points) != 0 {
			t.Errorf("AtPostcode(%q) = %q, %v; want none", postcode, firstLines(points), err)
		}
	}
}

func TestByMPAN(t *testing.T) {
	ctx := context.Background()
	held := at(1, "EX1 1AA", "1 High Street")
	held.HalfHourlySettled = true
	s := freshRegister(t, held, at(2, "EX1 1AA", "2 High Street"))
	if got, ok, err := s.ByMPAN(ctx, held.MPAN); err != nil || !ok || got != held {
		t.Errorf("ByMPAN(held) = %+v, %v, %v; want %+v", got, ok, err, held)
	}
	for _, mpan := range []string{mpanOf(3), "%", "_____________", held.MPAN[:12] + "%", "' OR '1'='1"} {
		if got, ok, err := s.ByMPAN(ctx, mpan); err != nil || ok {
			t.Errorf("ByMPAN(%q) = %+v, %v, %v; want none", mpan, got, ok, err)
		}
	}
}

func TestLoaded(t *testing.T) {
	ctx := context.Background()
	if loaded, err := freshRegister(t).Loaded(ctx); err != nil || loaded {
		t.Errorf("Loaded() of an empty register = %v, %v; want false", loaded, err)
	}
	if loaded, err := freshRegister(t, at(1, "EX1 1AA", "1 High Street")).Loaded(ctx); err != nil || !loaded {
		t.Errorf("Loaded() of a register of one = %v, %v; want true", loaded, err)
	}
}

func TestRanked(t *testing.T) {
	ctx := context.Background()
	s := freshRegister(t,
		at(1, "EX1 1AA", "10 High Street"), at(2, "EX1 1AA", "2 High Street"), at(3, "EX1 1AA", "Flat 1", "Rose Court", "12 High Street"),
		at(4, "EX1 1AA", "Flat 2", "Rose Court", "12 High Street"), at(5, "EX1 1AA", "12A High Street"),
		at(6, "EX1 1AB", "2 High Street"))
	mpans := func(ranked []meters.Candidate) []string {
		out := make([]string, len(ranked))
		for i, c := range ranked {
			out[i] = c.Point.MPAN
		}
		return out
	}

	ranked, err := s.Ranked(ctx, "EX1 1AA", "Flat 2, Rose Court, 12 High Street, Exeter, EX1 1AA", meters.MaxAtPostcode)
	if err != nil || len(ranked) != 5 || ranked[0].Point.MPAN != mpanOf(4) || ranked[0].Similarity != 1 {
		t.Fatalf("Ranked = %v, %v; want Flat 2 (1) first", ranked, err)
	}
	for _, c := range ranked[1:] {
		if c.Similarity != 0 {
			t.Errorf("%q ranked %v; want 0: it has no number 2", c.Point.Address(), c.Similarity)
		}
	}
	if p, err := meters.Pick(ranked); err != nil || p.MPAN != mpanOf(4) {
		t.Errorf("Pick = %+v, %v; want Flat 2", p, err)
	}
	if top, err := s.Ranked(ctx, "EX1 1AA", "Flat 2, Rose Court, 12 High Street, Exeter, EX1 1AA", 2); err != nil ||
		!slices.Equal(mpans(top), mpans(ranked[:2])) {
		t.Errorf("Ranked limit 2 = %v, %v; want the best two of all, %v", top, err, ranked[:2])
	}

	if none, err := s.Ranked(ctx, "EX1 1AA", "2 High Street, EX1 1AA", -1); err != nil || len(none) != 0 {
		t.Errorf("Ranked limit -1 = %v, %v; want none", none, err)
	}

	// The block without a flat: its two flats come first, too alike to name one.
	block, err := s.Ranked(ctx, "EX1 1AA", "Rose Court, 12 High Street, EX1 1AA", meters.MaxAtPostcode)
	if err != nil || len(block) != 5 || !slices.Contains([]string{mpanOf(3), mpanOf(4)}, block[0].Point.MPAN) ||
		!slices.Contains([]string{mpanOf(3), mpanOf(4)}, block[1].Point.MPAN) || block[1].Similarity < meters.MinSimilarity {
		t.Fatalf("Ranked = %v, %v; want Flat 1 and Flat 2 first", block, err)
	}
	// Ties come in natural order: "2 High Street" and "10 High Street" are both 0.
	if block[3].Point.MPAN != mpanOf(2) || block[4].Point.MPAN != mpanOf(1) || block[3].Similarity != block[4].Similarity {
		t.Errorf("ties: %v; want 2 High Street, then 10 High Street", block[3:])
	}
	if p, err := meters.Pick(block); err == nil {
		t.Errorf("the block named %q; want no one", p.Address())
	}
	for i := 1; i < len(block); i++ {
		if block[i].Similarity > block[i-1].Similarity {
			t.Errorf("not best first: %v", block)
		}
	}
	// Ties (nothing alike: all 0) come in natural address order.
	ranked, err = s.Ranked(ctx, "EX1 1AA", "Zzyzx, EX1 1AA", meters.MaxAtPostcode)
	want := []string{mpanOf(2), mpanOf(1), mpanOf(5), mpanOf(3), mpanOf(4)}
	if err != nil || !slices.Equal(mpans(ranked), want) {
		t.Errorf("ties: %v, %v; want natural order %q", ranked, err, want)
	}

}

// TestRankedTakesInputAsText: what looks like SQL or a pattern is text: it is ranked, never
// run or matched.
func TestRankedTakesInputAsText(t *testing.T) {
	ctx := context.Background()
	s := freshRegister(t, at(1, "EX1 1AA", "10 High Street"), at(2, "EX1 1AA", "2 High Street"),
		at(3, "EX1 1AA", "Flat 1", "Rose Court", "12 High Street"), at(4, "EX1 1AA", "Flat 2", "Rose Court", "12 High Street"),
		at(5, "EX1 1AA", "12A High Street"), at(6, "EX1 1AB", "2 High Street"))
	for _, address := range []string{`2' OR '1'='1 High Street; DROP TABLE meter_points; --, EX1 1AA`,
		`2 High Street \' \\ %, EX1 1AA`, `%_%, EX1 1AA`, `"2 High Street", EX1 1AA`} {
		ranked, err := s.Ranked(ctx, "EX1 1AA", address, meters.MaxAtPostcode)
		if err != nil || len(ranked) != 5 {
			t.Errorf("Ranked(%q) = %v, %v; want the postcode's 5", address, ranked, err)
		}
	}
	for _, postcode := range []string{"%", "EX1 1A_", "' OR '1'='1"} {
		if ranked, err := s.Ranked(ctx, postcode, "2 High Street", meters.MaxAtPostcode); err != nil || len(ranked) != 0 {
			t.Errorf("Ranked at %q = %v, %v; want none", postcode, ranked, err)
		}
	}
	if points, err := s.AtPostcode(ctx, "EX1 1AA", meters.MaxAtPostcode); err != nil || len(points) != 5 {
		t.Errorf("the register after the SQL-looking addresses: %d points, %v", len(points), err)
	}
}

func TestLookupsWhileTheDatabaseIsDown(t *testing.T) {
	if !testDB.CanStop() {
		t.Skip("the test database's server is not this process's")
	}
	ctx := context.Background()
	s := &meterstore.Store{Pool: testDB.Pool}
	if err := testDB.Stop(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := testDB.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}()
	if _, err := s.AtPostcode(ctx, "EX1 1AA", 10); !errors.Is(err, db.ErrUnavailable) {
		t.Errorf("AtPostcode: %v, want db.ErrUnavailable", err)
	}
	if _, _, err := s.ByMPAN(ctx, mpanOf(1)); !errors.Is(err, db.ErrUnavailable) {
		t.Errorf("ByMPAN: %v, want db.ErrUnavailable", err)
	}
	if _, err := s.Ranked(ctx, "EX1 1AA", "1 High Street, EX1 1AA", 10); !errors.Is(err, db.ErrUnavailable) {
		t.Errorf("Ranked: %v, want db.ErrUnavailable", err)
	}
}

// TestAnAbsentFlatIsNotItsNeighbour: the register lacks Flat 2 (a new flat, a mistyped
// number); its block's one other flat is 0.92 like it in full and was the answer.
func TestAnAbsentFlatIsNotItsNeighbour(t *testing.T) {
	ctx := context.Background()
	s := freshRegister(t, at(1, "EX1 1AA", "Flat 1", "Rose Court", "12 High Street"), at(2, "EX1 1AA", "14 High Street"),
		at(3, "EX1 1AA", "16 High Street"), at(4, "EX1 1AA", "Ivy Cottage", "High Street"))
	for _, address := range []string{"Flat 2, Rose Court, 12 High Street, Exeter, EX1 1AA", "18 High Street, Exeter, EX1 1AA"} {
		ranked, err := s.Ranked(ctx, "EX1 1AA", address, meters.MaxAtPostcode)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := meters.Pick(ranked); err == nil {
			t.Errorf("%q named %q; want no meter point", address, p.Address())
		}
	}
	// Leaving out the block's number still finds the flat.
	ranked, err := s.Ranked(ctx, "EX1 1AA", "Flat 1, Rose Court, High Street, EX1 1AA", meters.MaxAtPostcode)
	if p, perr := meters.Pick(ranked); err != nil || perr != nil || p.MPAN != mpanOf(1) {
		t.Errorf("Flat 1 without its block's number: %+v, %v, %v", p, err, perr)
	}
}

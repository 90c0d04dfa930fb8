// Package meterstore is the meter-point register in PostgreSQL (migration 00021, docs/platform.md,
// "The meter register"): the meters.Register Flexsite ships, and the import that loads it. The
// rules (what a row is, the one-line address, natural order, which address names one meter point)
// are internal/meters'; this package only stores, finds and ranks (pg_trgm's similarity).
package meterstore

import (
	"cmp"
	"context"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/meters"
)

// Store is the register.
type Store struct {
	Pool *pgxpool.Pool
}

var _ meters.Register = (*Store)(nil)

func (s *Store) classify(err error) error { return db.ClassifyOn(s.Pool, err) }

// pointColumns are the columns a meters.Point is read from, in scanPoint's order.
const pointColumns = `mpan, address_line_1, address_line_2, address_line_3, address_line_4, town, postcode,
	supplier_mpid, supplier_name, half_hourly_settled`

func scanPoint(row pgx.Row, extra ...any) (meters.Point, error) {
	var p meters.Point
	dest := append([]any{&p.MPAN, &p.AddressLines[0], &p.AddressLines[1], &p.AddressLines[2], &p.AddressLines[3],
		&p.Town, &p.Postcode, &p.SupplierMPID, &p.SupplierName, &p.HalfHourlySettled}, extra...)
	err := row.Scan(dest...)
	return p, err
}

// AtPostcode is the meter points at a normalised postcode in natural address order (the
// postcode index holds them in sort_key order), at most limit.
func (s *Store) AtPostcode(ctx context.Context, postcode string, limit int) ([]meters.Point, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+pointColumns+` FROM meter_points
		WHERE postcode = $1 ORDER BY sort_key LIMIT $2`, postcode, limit)
	if err != nil {
		return nil, s.classify(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (meters.Point, error) { return scanPoint(row) })
	return out, s.classify(err)
}

// ByMPAN is the meter point of an MPAN core; ok is false when the register has none.
func (s *Store) ByMPAN(ctx context.Context, mpan string) (meters.Point, bool, error) {
	p, err := scanPoint(s.Pool.QueryRow(ctx, `SELECT `+pointColumns+` FROM meter_points WHERE mpan = $1`, mpan))
	switch err = s.classify(err); err {
	case nil:
		return p, true, nil
	case db.ErrNotFound:
		return meters.Point{}, false, nil
	default:
		return meters.Point{}, false, err
	}
}

// Loaded tells whether the register holds any meter point (one row of the primary key read).
func (s *Store) Loaded(ctx context.Context) (bool, error) {
	var loaded bool
	if err := s.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM meter_points)`).Scan(&loaded); err != nil {
		return false, s.classify(err)
	}
	return loaded, nil
}

// Ranked is the meter points at a normalised postcode ranked by the by-address rule, best
// first, ties in natural address order, at most limit: pg_trgm's similarity of the words that
// tell the postcode's addresses apart (meters.TellingWords) to the given address's, or 0 for
// an address without a number the given one has (meters.HasNumbersOf). The
// postcode's meter points (at most meters.MaxAtPostcode) are all read, since which words they
// share depends on every one of them.
func (s *Store) Ranked(ctx context.Context, postcode, address string, limit int) ([]meters.Candidate, error) {
	points, err := s.AtPostcode(ctx, postcode, max(limit, meters.MaxAtPostcode))
	if err != nil || len(points) == 0 {
		return nil, err
	}
	addresses := make([]string, len(points))
	for i, p := range points {
		addresses[i] = p.Address()
	}
	telling, given := meters.TellingWords(addresses, postcode, address)
	var similarities []float64
	err = s.Pool.QueryRow(ctx, `SELECT array_agg(similarity(t, $2)::float8 ORDER BY n)
		FROM unnest($1::text[]) WITH ORDINALITY AS u(t, n)`, telling, given).Scan(&similarities)
	if err != nil {
		return nil, s.classify(err)
	}
	out := make([]meters.Candidate, len(points))
	for i, p := range points {
		out[i] = meters.Candidate{Point: p, Similarity: similarities[i]}
		if !meters.HasNumbersOf(telling[i], given) {
			out[i].Similarity = 0
		}
	}
	// Stable: the points came in natural address order, which breaks ties.
	slices.SortStableFunc(out, func(a, b meters.Candidate) int { return cmp.Compare(b.Similarity, a.Similarity) })
	return out[:max(0, min(limit, len(out)))], nil
}

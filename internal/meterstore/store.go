// Package meterstore is the meter-point register in PostgreSQL (migration 00021,
// spec/meters.md): the meters.Register Flexsite ships, and the import that loads it. The rules
// (what a row is, the one-line address, natural order, which address names one meter point)
// are internal/meters'; this package only stores, finds and ranks (pg_trgm's similarity).
package meterstore

import (
	"context"

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

// Ranked is the meter points at a normalised postcode ranked by pg_trgm's similarity of their
// one-line address to address, best first, ties in natural address order, at most limit.
func (s *Store) Ranked(ctx context.Context, postcode, address string, limit int) ([]meters.Candidate, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+pointColumns+`, similarity(address, $2)::float8 AS sim
		FROM meter_points WHERE postcode = $1 ORDER BY sim DESC, sort_key LIMIT $3`, postcode, address, limit)
	if err != nil {
		return nil, s.classify(err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (meters.Candidate, error) {
		var c meters.Candidate
		var err error
		c.Point, err = scanPoint(row, &c.Similarity)
		return c, err
	})
	return out, s.classify(err)
}

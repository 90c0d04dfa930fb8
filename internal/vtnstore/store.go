// Package vtnstore keeps the OpenADR door's own records in PostgreSQL (docs/openadr.md): the
// VENs an organisation's clients register and the assets each holds as resources (migration
// 00028). Every query names the organisation, so one organisation never reads another's.
package vtnstore

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db"
)

// Store is the VTN's records.
type Store struct {
	Pool *pgxpool.Pool
}

func (s *Store) classify(err error) error { return db.ClassifyOn(s.Pool, err) }

// MaxHeld bounds how many assets one client's VENs hold that a lookup answers: a VEN
// client's searches filter by them, so the bound keeps every such search's cost fixed.
const MaxHeld = 10_000

// AssetsHeldBy answers the asset ids (resource names) held by the VENs that the API client
// clientName of organisation registered, at most MaxHeld: what a VEN client's token sees of
// events, and may report on.
func (s *Store) AssetsHeldBy(ctx context.Context, organisation, clientName string) ([]string, error) {
	rows, err := s.Pool.Query(ctx, `SELECT r.resource_name FROM openadr_resources r
		JOIN openadr_vens v ON v.organisation = r.organisation AND v.id = r.ven_id
		WHERE v.organisation = $1 AND v.client_name = $2
		ORDER BY r.resource_name LIMIT $3`, organisation, clientName, MaxHeld)
	if err != nil {
		return nil, s.classify(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, s.classify(err)
		}
		out = append(out, name)
	}
	return out, s.classify(rows.Err())
}

// HolderOf answers the API client whose VEN holds the asset (resource name) in the
// organisation, and whether one does: one lookup by the unique key.
func (s *Store) HolderOf(ctx context.Context, organisation, resourceName string) (string, bool, error) {
	var client *string
	err := s.Pool.QueryRow(ctx, `SELECT `+HolderColumn("$1", "$2::text"), organisation, resourceName).Scan(&client)
	if err != nil {
		return "", false, s.classify(err)
	}
	if client == nil {
		return "", false, nil
	}
	return *client, true, nil
}

// HolderColumn is HolderOf's lookup as one SQL expression over the organisation's and the
// resource name's expressions: the holder's client name, NULL when no VEN holds it. Another
// store's statement reads it with its own row (dispatchstore.OfAnd: a dispatch and who holds
// its asset in one round trip). Each table is read by a unique key, the VEN's id the inner
// lookup's value: whatever the statistics say, no plan reads the organisation's other VENs.
func HolderColumn(organisation, resourceName string) string {
	return `(SELECT v.client_name FROM openadr_vens v WHERE v.organisation = ` + organisation + ` AND v.id =
		(SELECT r.ven_id FROM openadr_resources r WHERE r.organisation = ` + organisation + ` AND r.resource_name = ` +
		resourceName + `))`
}

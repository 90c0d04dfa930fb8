// Package pagestore is the hosted rewards page's private state in PostgreSQL (internal/db's
// tables rewards_links and bank_details): the rewards links and the sessions they open, and
// sites' bank details, sealed with AES-256-GCM under a key of one Secret in the manager's
// namespace (an internal/sealing key ring, DefaultKeysSecret). It replaced Secrets, so that the manager needs no access to the
// Secrets of the whole cluster. The use cases (internal/app/rewards) decide what a link's
// state holds (hashes only: never a code, a session secret or an emailed code); this package
// stores it, and never logs what it stores.
package pagestore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/sealing"
)

// DefaultKeysSecret is the name of the bank details key Secret in the manager's namespace.
const DefaultKeysSecret = "flexsite-bank-keys"

// ErrChanged is a conditional write that lost: the row changed (or went) since it was read.
var ErrChanged = errors.New("the rewards link changed meanwhile")

// ErrExists is a link key stored already.
var ErrExists = errors.New("a rewards link with this key exists")

// Store is the rewards page's private state.
type Store struct {
	Pool *pgxpool.Pool
	// Keys seal and open bank details.
	Keys *sealing.KeyRing
}

// Link is a stored rewards link: its state as the use case encoded it, and the version a
// conditional write names.
type Link struct {
	State   []byte
	Version int64
}

// CreateLink stores a new link, which nobody can use after deadAfter.
func (s *Store) CreateLink(ctx context.Context, key string, state []byte, deadAfter time.Time) error {
	_, err := s.Pool.Exec(ctx, `INSERT INTO rewards_links (link_key, state, dead_after) VALUES ($1, $2, $3)`,
		key, state, deadAfter)
	var c *db.ConstraintError
	if err = db.Classify(err); errors.As(err, &c) && c.Kind == "unique" {
		return ErrExists
	}
	return err
}

// Link reads a link by key: db.ErrNotFound when there is none.
func (s *Store) Link(ctx context.Context, key string) (Link, error) {
	var l Link
	err := s.Pool.QueryRow(ctx, `SELECT state, version FROM rewards_links WHERE link_key = $1`, key).
		Scan(&l.State, &l.Version)
	return l, db.Classify(err)
}

// UpdateLink writes a link's state if it is still at version (ErrChanged if not), and answers
// the new version.
func (s *Store) UpdateLink(ctx context.Context, key string, version int64, state []byte, deadAfter time.Time) (int64, error) {
	var next int64
	err := s.Pool.QueryRow(ctx, `UPDATE rewards_links SET state = $3, version = version + 1, dead_after = $4
		WHERE link_key = $1 AND version = $2 RETURNING version`, key, version, state, deadAfter).Scan(&next)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, ErrChanged
	}
	return next, db.Classify(err)
}

// SweepLinks deletes the links nobody can use any more (dead before now), answering how many.
func (s *Store) SweepLinks(ctx context.Context, now time.Time) (int64, error) {
	tag, err := s.Pool.Exec(ctx, `DELETE FROM rewards_links WHERE dead_after < $1`, now)
	return tag.RowsAffected(), db.Classify(err)
}

// aad binds a sealed row to its organisation and site.
func aad(organisation, siteID string) []byte {
	return []byte("flexsite bank details\x00" + organisation + "\x00" + siteID)
}

// PutBankDetails seals plaintext (the use case's encoding of the details) under the active key
// and stores it as the site's bank details, replacing what was there.
func (s *Store) PutBankDetails(ctx context.Context, organisation, siteID string, plaintext []byte) error {
	kid, nonce, ciphertext, err := s.Keys.Seal(ctx, plaintext, aad(organisation, siteID))
	if err != nil {
		return err
	}
	_, err = s.Pool.Exec(ctx, `INSERT INTO bank_details (organisation, site_id, key_id, nonce, ciphertext)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (organisation, site_id) DO UPDATE SET key_id = excluded.key_id, nonce = excluded.nonce,
			ciphertext = excluded.ciphertext, updated_at = now()`, organisation, siteID, kid, nonce, ciphertext)
	return db.Classify(err)
}

// PutBankDetailsIfAbsent stores the site's bank details unless it has some already (an import
// of older details never overwrites what the household entered since), answering whether it did.
func (s *Store) PutBankDetailsIfAbsent(ctx context.Context, organisation, siteID string, plaintext []byte) (bool, error) {
	kid, nonce, ciphertext, err := s.Keys.Seal(ctx, plaintext, aad(organisation, siteID))
	if err != nil {
		return false, err
	}
	tag, err := s.Pool.Exec(ctx, `INSERT INTO bank_details (organisation, site_id, key_id, nonce, ciphertext)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (organisation, site_id) DO NOTHING`, organisation, siteID, kid, nonce, ciphertext)
	return tag.RowsAffected() == 1, db.Classify(err)
}

// Imported reports whether the one-time import name is done.
func (s *Store) Imported(ctx context.Context, name string) (bool, error) {
	var done bool
	err := s.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pagestore_imports WHERE name = $1)`, name).Scan(&done)
	return done, db.Classify(err)
}

// MarkImported records the one-time import name as done.
func (s *Store) MarkImported(ctx context.Context, name string) error {
	_, err := s.Pool.Exec(ctx, `INSERT INTO pagestore_imports (name) VALUES ($1) ON CONFLICT DO NOTHING`, name)
	return db.Classify(err)
}

// BankDetails opens the site's bank details: nil when there are none.
func (s *Store) BankDetails(ctx context.Context, organisation, siteID string) ([]byte, error) {
	var kid string
	var nonce, ciphertext []byte
	err := s.Pool.QueryRow(ctx, `SELECT key_id, nonce, ciphertext FROM bank_details WHERE organisation = $1 AND site_id = $2`,
		organisation, siteID).Scan(&kid, &nonce, &ciphertext)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, db.Classify(err)
	}
	return s.Keys.Open(ctx, kid, nonce, ciphertext, aad(organisation, siteID))
}

// ForgetSite deletes the site's bank details (the site is being deleted).
func (s *Store) ForgetSite(ctx context.Context, organisation, siteID string) error {
	_, err := s.Pool.Exec(ctx, `DELETE FROM bank_details WHERE organisation = $1 AND site_id = $2`, organisation, siteID)
	return db.Classify(err)
}

// Reseal seals again, under the active key, up to limit rows sealed with another key the ring
// holds (a row of a key no longer held cannot be opened, so it is left), and
// answers how many it resealed: the leader's sweep runs it, so that after a rotation the old
// key may leave the Secret once no row names it (docs/operations.md). A row the household
// changed meanwhile is left as the household wrote it (the update names the nonce read).
func (s *Store) Reseal(ctx context.Context, limit int) (int, error) {
	active, _, err := s.Keys.Active(ctx)
	if err != nil {
		return 0, err
	}
	type sealed struct {
		organisation, siteID, kid string
		nonce, ciphertext         []byte
	}
	rows, err := s.Pool.Query(ctx, `SELECT organisation, site_id, key_id, nonce, ciphertext FROM bank_details
		WHERE key_id <> $1 AND key_id = ANY($3) LIMIT $2`, active, limit, s.Keys.Held())
	if err != nil {
		return 0, db.Classify(err)
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sealed, error) {
		var r sealed
		err := row.Scan(&r.organisation, &r.siteID, &r.kid, &r.nonce, &r.ciphertext)
		return r, err
	})
	if err != nil {
		return 0, db.Classify(err)
	}
	done := 0
	for _, r := range found {
		data := aad(r.organisation, r.siteID)
		plaintext, err := s.Keys.Open(ctx, r.kid, r.nonce, r.ciphertext, data)
		if err != nil {
			return done, err
		}
		kid, nonce, ciphertext, err := s.Keys.Seal(ctx, plaintext, data)
		if err != nil {
			return done, err
		}
		tag, err := s.Pool.Exec(ctx, `UPDATE bank_details SET key_id = $3, nonce = $4, ciphertext = $5
			WHERE organisation = $1 AND site_id = $2 AND nonce = $6`, r.organisation, r.siteID, kid, nonce, ciphertext, r.nonce)
		if err != nil {
			return done, db.Classify(err)
		}
		done += int(tag.RowsAffected())
	}
	return done, nil
}

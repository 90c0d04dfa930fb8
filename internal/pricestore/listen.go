package pricestore

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/flexsite/flexsite/internal/db"
)

// ChangedChannel is the channel Put notifies, in its transaction (so at commit), with
// "<organisation>/<market>": the replicas that keep prices drop that market's.
const ChangedChannel = "flexsite_prices"

// notifyChanged sends the change in tx, after its rows: PostgreSQL delivers it at commit, and
// not at all when the transaction rolls back.
func notifyChanged(ctx context.Context, tx pgx.Tx, organisation, market string) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, ChangedChannel, organisation+"/"+market)
	return err
}

// Watch calls changed with the organisation and market of every declaration committed
// (ChangedChannel), until ctx ends (db.Watch: one connection of the pool). listening is called
// each time it starts to listen (what was notified before is not known: anything may have
// changed), lost each time a connection that listened is lost (from then until listening,
// notifications may be missed). changed must not block: it runs on the listening goroutine.
func (s *Store) Watch(ctx context.Context, changed func(organisation, market string), listening, lost func()) {
	db.Watch(ctx, s.Pool, ChangedChannel, func(bool) { listening() }, func(payload string) {
		if org, market, ok := strings.Cut(payload, "/"); ok {
			changed(org, market)
		}
	}, lost)
}

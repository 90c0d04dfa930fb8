package pricestore

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
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
// (ChangedChannel), until ctx ends. It holds one connection of the pool. listening is called
// each time it starts to listen (what was notified before is not known: anything may have
// changed), lost each time a connection that listened is lost (from then until listening,
// notifications may be missed). changed must not block: it runs on the listening goroutine.
func (s *Store) Watch(ctx context.Context, changed func(organisation, market string), listening, lost func()) {
	for ctx.Err() == nil {
		listened := false
		_ = s.listenOnce(ctx, changed, func() { listened = true; listening() }) // the database is away: try again shortly
		if listened {
			lost()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (s *Store) listenOnce(ctx context.Context, changed func(organisation, market string), listening func()) error {
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection's session listens: it is taken out of the pool for good.
	pc := conn.Hijack()
	defer func() { _ = pc.Close(context.Background()) }()
	if _, err := pc.Exec(ctx, "LISTEN "+ChangedChannel); err != nil {
		return err
	}
	listening()
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if org, market, ok := strings.Cut(n.Payload, "/"); ok && n.Channel == ChangedChannel {
			changed(org, market)
		}
	}
}

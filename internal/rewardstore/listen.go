package rewardstore

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Listen calls changed with the namespace and API id of every site whose ledger a commit
// changed (ChangedChannel), until ctx ends. It holds one connection of pool; when that is lost
// (the database went away) it connects again, and then calls resync, as notifications sent
// meanwhile were missed.
func Listen(ctx context.Context, pool *pgxpool.Pool, changed func(namespace, siteID string), resync func()) error {
	first := true
	for ctx.Err() == nil {
		err := listenOnce(ctx, pool, changed, func() {
			if !first {
				resync()
			}
			first = false
		})
		if ctx.Err() != nil {
			return nil
		}
		_ = err // the database is away: try again shortly
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

func listenOnce(ctx context.Context, pool *pgxpool.Pool, changed func(namespace, siteID string), listening func()) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection's session listens: it is not given back to the pool for others.
	defer conn.Hijack().Close(context.Background()) //nolint:errcheck // closing a dead or finished connection
	if _, err := conn.Exec(ctx, "LISTEN "+ChangedChannel); err != nil {
		return err
	}
	listening()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if ns, name, ok := strings.Cut(n.Payload, "/"); ok {
			changed(ns, name)
		}
	}
}

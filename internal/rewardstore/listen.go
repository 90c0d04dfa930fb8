package rewardstore

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Listen calls changed with the namespace and API id of every site whose ledger a commit
// changed (ChangedChannel), until ctx ends. It holds one connection of pool; once it listens it
// calls resync (first, reconnected bool): on the first connection, for what was committed
// before this process listened (a commit made while no manager listened); after
// the connection was lost and found again, for the notifications sent meanwhile.
func Listen(ctx context.Context, pool *pgxpool.Pool, changed func(namespace, siteID string), resync func(reconnected bool)) error {
	return Watch(ctx, pool, changed, resync, nil)
}

// Watch is Listen that also calls lost (when not nil) each time a connection that listened
// is lost: from then until listening(true), notifications may be missed.
func Watch(ctx context.Context, pool *pgxpool.Pool, changed func(namespace, siteID string), resync func(reconnected bool),
	lost func()) error {
	first := true
	for ctx.Err() == nil {
		listened := false
		err := listenOnce(ctx, pool, changed, func() {
			listened = true
			resync(!first)
			first = false
		})
		if listened && lost != nil {
			lost()
		}
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
		if ns, name, ok := strings.Cut(n.Payload, "/"); ok {
			changed(ns, name)
		}
	}
}

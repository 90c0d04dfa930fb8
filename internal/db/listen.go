package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Watch LISTENs on channel until ctx ends, with one connection taken out of pool for good (its
// session is the one that listens), and listens again a second after the connection is lost
// or the database is away. listening (when not nil) is called each time it starts to listen,
// first telling the first time from a reconnection (after which anything may have changed
// unheard); notified with each notification's payload; lost (when not nil) each time a
// connection that listened is lost. The callbacks run on the listening goroutine and must not
// block. Every store that follows PostgreSQL's notifications listens through it.
func Watch(ctx context.Context, pool *pgxpool.Pool, channel string, listening func(first bool),
	notified func(payload string), lost func()) {
	first := true
	for ctx.Err() == nil {
		listened := false
		_ = listenOnce(ctx, pool, channel, notified, func() { // the error: the database is away, try again shortly
			listened = true
			if listening != nil {
				listening(first)
			}
			first = false
		})
		if listened && lost != nil {
			lost()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func listenOnce(ctx context.Context, pool *pgxpool.Pool, channel string, notified func(string), listening func()) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	pc := conn.Hijack()
	defer func() { _ = pc.Close(context.Background()) }()
	if _, err := pc.Exec(ctx, "LISTEN "+channel); err != nil {
		return err
	}
	listening()
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		notified(n.Payload)
	}
}

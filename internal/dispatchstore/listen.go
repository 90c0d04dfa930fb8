package dispatchstore

import (
	"context"
	"strings"
	"time"
)

// Listen calls changed with the organisation and the flex event of every dispatch change
// NOTIFYed on Channel, until ctx ends, and changed("", "") each time it starts listening
// again after a lost connection: what changed meanwhile is not known, anything may have.
// changed must not block (it is called on the listening connection's goroutine). It holds one
// connection of the pool.
func (s *Store) Listen(ctx context.Context, changed func(organisation, flexEvent string)) {
	first := true
	for ctx.Err() == nil {
		_ = s.listenOnce(ctx, changed, first) // the database is away: try again shortly
		first = false
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (s *Store) listenOnce(ctx context.Context, changed func(organisation, flexEvent string), first bool) error {
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection's session listens: it is taken out of the pool for good.
	pc := conn.Hijack()
	defer func() { _ = pc.Close(context.Background()) }()
	if _, err := pc.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	if !first {
		changed("", "")
	}
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if org, flexEvent, ok := strings.Cut(n.Payload, "/"); ok && n.Channel == Channel {
			changed(org, flexEvent)
		}
	}
}

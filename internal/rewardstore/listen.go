package rewardstore

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db"
)

// Watch calls changed with the namespace and API id of every site whose ledger a commit
// changed (ChangedChannel), until ctx ends. It holds one connection of pool; once it listens it
// calls resync (first, reconnected bool): on the first connection, for what was committed
// before this process listened (a commit made while no manager listened); after the
// connection was lost and found again, for the notifications sent meanwhile. lost (when not
// nil) is called each time a connection that listened is lost: from then until resync(true),
// notifications may be missed (db.Watch). The callbacks must not block.
func Watch(ctx context.Context, pool *pgxpool.Pool, changed func(namespace, siteID string), resync func(reconnected bool),
	lost func()) error {
	db.Watch(ctx, pool, ChangedChannel, func(first bool) { resync(!first) }, func(payload string) {
		if ns, name, ok := strings.Cut(payload, "/"); ok {
			changed(ns, name)
		}
	}, lost)
	return nil
}

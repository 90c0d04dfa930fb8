package dispatchstore

import (
	"context"
	"strings"

	"github.com/flexsite/flexsite/internal/db"
)

// Listen calls changed with the organisation and the flex event of every dispatch change
// NOTIFYed on Channel, until ctx ends, and reconnected each time it starts listening again
// after a lost connection: what changed meanwhile is not known, anything may have. The
// callbacks must not block (they are called on the listening connection's goroutine). It holds
// one connection of the pool.
func (s *Store) Listen(ctx context.Context, changed func(organisation, flexEvent string), reconnected func()) {
	db.Watch(ctx, s.Pool, Channel, func(first bool) {
		if !first {
			reconnected()
		}
	}, func(payload string) {
		if org, flexEvent, ok := strings.Cut(payload, "/"); ok {
			changed(org, flexEvent)
		}
	}, nil)
}

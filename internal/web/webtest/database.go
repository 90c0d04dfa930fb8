package webtest

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// DownDatabase is a pool whose database is away: it is closed, so every query fails as a
// database that does not answer does (db.ErrUnavailable once classified), without a network
// connection. The doors' fuzz tests build their use cases on it: Flexsite has no mode without
// a database, and a door that reaches it must answer 503, not crash.
func DownDatabase() *pgxpool.Pool {
	pool, err := pgxpool.New(context.Background(), "postgres://flexsite@127.0.0.1:1/flexsite")
	if err != nil {
		panic(err)
	}
	pool.Close()
	return pool
}

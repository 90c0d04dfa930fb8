package db_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flexsite/flexsite/internal/db"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		name        string
		err         error
		unavailable bool
		constraint  string
		notFound    bool
	}{
		{name: "nil", err: nil},
		{name: "no rows", err: pgx.ErrNoRows, notFound: true},
		{name: "refused", err: fmt.Errorf("dial: %w", syscall.ECONNREFUSED), unavailable: true},
		{name: "reset", err: syscall.ECONNRESET, unavailable: true},
		{name: "closed mid-read", err: io.ErrUnexpectedEOF, unavailable: true},
		{name: "admin shutdown", err: &pgconn.PgError{Code: "57P01"}, unavailable: true},
		{name: "starting up", err: &pgconn.PgError{Code: "57P03"}, unavailable: true},
		{name: "too many connections", err: &pgconn.PgError{Code: "53300"}, unavailable: true},
		{name: "connection failure", err: &pgconn.PgError{Code: "08006"}, unavailable: true},
		{name: "serialization failure", err: &pgconn.PgError{Code: "40001"}, unavailable: true},
		{name: "unique", err: &pgconn.PgError{Code: "23505", ConstraintName: "k"}, constraint: "unique"},
		{name: "foreign key", err: &pgconn.PgError{Code: "23503"}, constraint: "foreign_key"},
		{name: "check", err: &pgconn.PgError{Code: "23514"}, constraint: "check"},
		{name: "append-only trigger", err: &pgconn.PgError{Code: "23000"}, constraint: "integrity"},
		{name: "syntax error is ours", err: &pgconn.PgError{Code: "42601"}},
		{name: "cancelled is the caller's", err: context.Canceled},
		{name: "deadline", err: context.DeadlineExceeded, unavailable: true},
		{name: "already classified", err: fmt.Errorf("x: %w", db.ErrUnavailable), unavailable: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := db.Classify(c.err)
			if u := errors.Is(got, db.ErrUnavailable); u != c.unavailable {
				t.Errorf("unavailable = %v, want %v (%v)", u, c.unavailable, got)
			}
			if nf := errors.Is(got, db.ErrNotFound); nf != c.notFound {
				t.Errorf("not found = %v, want %v", nf, c.notFound)
			}
			var ce *db.ConstraintError
			kind := ""
			if errors.As(got, &ce) {
				kind = ce.Kind
			}
			if kind != c.constraint {
				t.Errorf("constraint %q, want %q", kind, c.constraint)
			}
			if c.err == nil && got != nil {
				t.Errorf("nil classified as %v", got)
			}
		})
	}
}

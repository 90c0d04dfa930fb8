package db

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnavailable is the database not answering now (refused, closed, shutting down, starting,
// too many connections): the caller should try again shortly. Errors that mean it wrap it.
var ErrUnavailable = errors.New("the database is unavailable")

// ErrNotFound is a query that found no row.
var ErrNotFound = errors.New("not found")

// RetryAfterSeconds is what callers of an unavailable database are told to wait.
const RetryAfterSeconds = "5"

// ConstraintError is a constraint the database refused a write for.
type ConstraintError struct {
	// Kind is "unique", "foreign_key", "check", "not_null" or "integrity" (the append-only trigger).
	Kind string
	// Constraint is the constraint's name, when the server says.
	Constraint string
	err        error
}

func (e *ConstraintError) Error() string {
	return fmt.Sprintf("%s constraint %s violated: %v", e.Kind, e.Constraint, e.err)
}
func (e *ConstraintError) Unwrap() error { return e.err }

// Classify says what a database error means: ErrUnavailable (wrapped) when the database is not
// there, ErrNotFound for no rows, a *ConstraintError for a refused write, else err itself.
func Classify(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUnavailable) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "23505":
			return &ConstraintError{Kind: "unique", Constraint: pgErr.ConstraintName, err: err}
		case "23503":
			return &ConstraintError{Kind: "foreign_key", Constraint: pgErr.ConstraintName, err: err}
		case "23514":
			return &ConstraintError{Kind: "check", Constraint: pgErr.ConstraintName, err: err}
		case "23502":
			return &ConstraintError{Kind: "not_null", Constraint: pgErr.ConstraintName, err: err}
		case "23000":
			return &ConstraintError{Kind: "integrity", Constraint: pgErr.ConstraintName, err: err}
		}
		switch pgErr.Code[:2] {
		case "08", // connection exception
			"57", // operator intervention: admin_shutdown, crash_shutdown, cannot_connect_now
			"53": // insufficient resources: too many connections, disk full, out of memory
			return fmt.Errorf("%w: %s", ErrUnavailable, pgErr.Message)
		}
		if pgErr.Code == "40001" || pgErr.Code == "40P01" { // serialization failure, deadlock
			return fmt.Errorf("%w: %s", ErrUnavailable, pgErr.Message)
		}
		return err
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	switch {
	case errors.As(err, &connErr), errors.As(err, &netErr),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		pgconn.SafeToRetry(err), pgconn.Timeout(err) && !errors.Is(err, context.Canceled):
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err.Error() == "conn closed" || err.Error() == "closed pool" {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return err
}

// Unavailable reports whether err (classified or not) is the database not being there.
func Unavailable(err error) bool { return errors.Is(Classify(err), ErrUnavailable) }

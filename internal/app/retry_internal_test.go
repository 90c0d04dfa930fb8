package app

import (
	"context"
	"errors"
	"testing"
)

// A request that loses write races is tried again with backoff; the waits honour its context,
// so a request whose client has gone stops at once instead of sleeping through every attempt
// (on main, transact and DeleteSite slept with time.Sleep and tried again regardless).
func TestUntilWon(t *testing.T) {
	refused := Fail(Conflict, "refused")
	taken := &Error{Kind: Conflict, Detail: "MPAN being moved"}
	for _, tc := range []struct {
		name string
		// answers are what the attempts answer, in turn; the last repeats.
		answers      []error
		want         error
		wantAttempts int
	}{
		{"won at once", []error{nil}, nil, 1},
		{"won after two lost races", []error{errRetry, errRetry, nil}, nil, 3},
		{"a refusal ends it", []error{errRetry, refused}, refused, 2},
		{"still losing: too many changes", []error{errRetry}, ErrTooManyChanges, maxAttempts},
		{"still losing: the last race's answer", []error{&retry{answer: taken}}, taken, maxAttempts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attempts := 0
			var fresh []bool
			err := untilWon(context.Background(), func(f bool) error {
				fresh = append(fresh, f)
				attempts++
				return tc.answers[min(attempts, len(tc.answers))-1]
			})
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("untilWon = %v, want %v", err, tc.want)
			}
			if attempts != tc.wantAttempts {
				t.Fatalf("%d attempts, want %d", attempts, tc.wantAttempts)
			}
			for i, f := range fresh {
				if f != (i > 0) {
					t.Fatalf("attempt %d fresh = %v: only attempts after a lost race read fresh", i, f)
				}
			}
		})
	}
}

func TestUntilWonStopsWhenTheRequestIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	attempts := 0
	err := untilWon(ctx, func(bool) error {
		attempts++
		if attempts == 2 {
			cancel() // the client goes while the request is losing races
		}
		return errRetry
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("untilWon = %v, want context.Canceled", err)
	}
	if attempts != 2 {
		t.Fatalf("%d attempts, want 2: none after the request was cancelled", attempts)
	}
}

// transact undoes what it wrote and answers the cancellation when its request is cancelled
// between attempts.
func TestTransactStopsWhenTheRequestIsCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &Service{}
	attempts := 0
	err := s.transact(ctx, func(_ store, _ *writeLog) error {
		attempts++
		cancel()
		return errRetry
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("transact = %v, want context.Canceled", err)
	}
	if attempts != 1 {
		t.Fatalf("%d attempts, want 1", attempts)
	}
}

package dispatchstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

// Listen tells each change (an issue, a reported status, a cancellation) as "<organisation>/<flex
// event>", for the FlexEvent controller of any replica.
func TestListenTellsEachChange(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := &dispatchstore.Store{Pool: testDB.Pool}
	told := make(chan string, 64)
	listening := make(chan struct{})
	go store.Listen(ctx, func(org, flexEvent string) { told <- org + "/" + flexEvent }, func() {})
	// Listening has begun once a NOTIFY sent after it arrives: send until one does.
	go func() {
		defer close(listening)
		for {
			if _, err := testDB.Pool.Exec(ctx, `SELECT pg_notify($1, 'probe/probe')`, dispatchstore.Channel); err != nil {
				return
			}
			select {
			case got := <-told:
				if got == "probe/probe" {
					return
				}
			case <-time.After(50 * time.Millisecond):
			case <-ctx.Done():
				return
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(30 * time.Second):
		t.Fatal("Listen never listened")
	}
	for len(told) > 0 {
		<-told // the probes' echoes
	}
	next := func(what string) string {
		t.Helper()
		for {
			select {
			case got := <-told:
				// Other tests' organisations may still be told (a report's NOTIFY goes out
				// after its commit, coalesced): only this test's is looked at.
				if strings.HasPrefix(got, "org-listen/") {
					return got
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("no notification after %s", what)
			}
		}
	}
	now := time.Now()
	if _, err := store.Issue(ctx, "org-listen", "https://flexsite.test", dispatches("ev-listen", 3), nil, now); err != nil {
		t.Fatal(err)
	}
	if got := next("issuing"); got != "org-listen/ev-listen" {
		t.Fatalf("after issuing: %q", got)
	}
	if _, err := store.Record(ctx, "org-listen", dispatchstore.Report{AssetID: "asset-0",
		EventID: dispatch.EventID("org-listen", "ev-listen", "asset-0"), Status: dispatch.Executed, At: now, By: "test"}, now); err != nil {
		t.Fatal(err)
	}
	if got := next("a report"); got != "org-listen/ev-listen" {
		t.Fatalf("after a report: %q", got)
	}
	if _, err := store.Cancel(ctx, "org-listen", "ev-listen", now); err != nil {
		t.Fatal(err)
	}
	if got := next("cancelling"); got != "org-listen/ev-listen" {
		t.Fatalf("after cancelling: %q", got)
	}
}

package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

var testDB *dbtest.Database

func TestMain(m *testing.M) { dbtest.Main(m, &testDB) }

// payment-status against a real PostgreSQL: the change is recorded with who and when, and
// what cannot be changed is refused with a reason and records nothing.
func TestPaymentStatus(t *testing.T) {
	ctx := context.Background()
	store := &rewardstore.Store{Pool: testDB.Pool}
	site := rewardstore.Site{Namespace: "acme", ID: identity.NewID()}
	at := metav1.NewTime(time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC))
	credit := flexv1.RewardTransaction{ID: identity.NewID(), Type: "flex event", CreditPence: 1500, StartTime: &at,
		SettlementDate: "2026-10-02"}
	withdrawal := flexv1.RewardTransaction{ID: identity.NewID(), Type: "withdrawal", CreditPence: -1500, StartTime: &at,
		SettlementDate: "2026-10-02", PaymentStatus: "pending_approval"}
	if err := store.AppendMany(ctx, site, []flexv1.RewardTransaction{credit, withdrawal}, rewardstore.SourceAPI); err != nil {
		t.Fatal(err)
	}
	admin := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(append([]string{"payment-status", "--database-url", testDB.URL, "--organisation", site.Namespace,
			"--site-id", site.ID}, args...), "", &out, &errOut)
		return out.String(), err
	}

	out, err := admin("--transaction-id", withdrawal.ID, "--status", "approved", "--actor", "ops:jo")
	if err != nil {
		t.Fatal(err)
	}
	if want := withdrawal.ID + ": payment_status approved (recorded as ops:jo)\n"; out != want {
		t.Errorf("output %q, want %q", out, want)
	}
	changes, err := store.StatusChanges(ctx, site, withdrawal.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 1 || changes[0].From != "pending_approval" || changes[0].To != "approved" || changes[0].Actor != "ops:jo" ||
		time.Since(changes[0].At) > time.Hour {
		t.Errorf("recorded %+v, want one change pending_approval → approved by ops:jo, now", changes)
	}
	if rev, err := store.Revision(ctx, site); err != nil || rev != 3 {
		t.Errorf("history revision %d (%v), want 3: two transactions and a status change", rev, err)
	}

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"an unknown status", []string{"--transaction-id", withdrawal.ID, "--status", "paid"}, `--status "paid" is not one of`},
		{"a transaction id that is not a UUID", []string{"--transaction-id", "w-1", "--status", "posted"}, "--transaction-id"},
		{"a transaction the site does not have", []string{"--transaction-id", identity.NewID(), "--status", "posted"}, "no transaction"},
		{"a credit", []string{"--transaction-id", credit.ID, "--status", "posted"}, "withdrawal"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := admin(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
	if changes, err := store.StatusChanges(ctx, site, withdrawal.ID); err != nil || len(changes) != 1 {
		t.Errorf("after the refusals, %d changes (%v), want still 1", len(changes), err)
	}
}

// payment-status walks the payment's state machine one step at a time: a step it does not
// allow is refused with the reason (an error: the command exits non-zero) and records nothing.
// The double payment: a failed payment returned the money, the household withdrew it again,
// and the first is then set to posted; failed is final, so that is refused.
func TestPaymentStatusStateMachine(t *testing.T) {
	ctx := context.Background()
	store := &rewardstore.Store{Pool: testDB.Pool}
	site := rewardstore.Site{Namespace: "acme", ID: identity.NewID()}
	at := metav1.NewTime(time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC))
	credit := flexv1.RewardTransaction{ID: identity.NewID(), Type: "flex event", CreditPence: 1500, StartTime: &at}
	withdrawal := flexv1.RewardTransaction{ID: identity.NewID(), Type: "withdrawal", CreditPence: -1500, StartTime: &at,
		PaymentStatus: "pending_approval"}
	if err := store.AppendMany(ctx, site, []flexv1.RewardTransaction{credit, withdrawal}, rewardstore.SourceAPI); err != nil {
		t.Fatal(err)
	}
	admin := func(status string) error {
		var out, errOut bytes.Buffer
		return run([]string{"payment-status", "--database-url", testDB.URL, "--organisation", site.Namespace,
			"--site-id", site.ID, "--transaction-id", withdrawal.ID, "--status", status}, "", &out, &errOut)
	}
	changes := func() int {
		c, err := store.StatusChanges(ctx, site, withdrawal.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(c)
	}
	refused := func(status, want string) {
		t.Helper()
		before := changes()
		if err := admin(status); err == nil || !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), "nothing was changed") {
			t.Errorf("--status %s: error %v, want one saying %q and that nothing was changed", status, err, want)
		}
		if after := changes(); after != before {
			t.Errorf("--status %s refused, but %d changes recorded (was %d)", status, after, before)
		}
	}

	refused("posted", "cannot move from pending_approval to posted")
	for _, step := range []string{"approved", "processing"} {
		if err := admin(step); err != nil {
			t.Fatalf("--status %s: %v", step, err)
		}
	}
	refused("processing", "is processing already")
	refused("cancelled", "from processing it may move to posted or failed")
	if err := admin("failed"); err != nil {
		t.Fatal(err)
	}
	if b, err := store.Balance(ctx, site); err != nil || b.Current != 1500 {
		t.Fatalf("after the payment failed, balance %d (%v), want the 1500 back", b.Current, err)
	}
	again := flexv1.RewardTransaction{ID: identity.NewID(), Type: "withdrawal", CreditPence: -1500, StartTime: &at,
		PaymentStatus: "pending_approval"}
	if _, _, err := store.Append(ctx, site, again, rewardstore.SourceWithdrawal); err != nil {
		t.Fatal(err)
	}
	refused("posted", "failed is final")
	if b, err := store.Balance(ctx, site); err != nil || b.Current != 0 {
		t.Errorf("balance %d (%v), want 0: the money withdrawn once again, never twice", b.Current, err)
	}
	if got, err := store.Get(ctx, site, withdrawal.ID); err != nil || got.PaymentStatus != "failed" {
		t.Errorf("the first withdrawal is %q (%v), want still failed", got.PaymentStatus, err)
	}
}

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

package rewardstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// mixedHistory writes n transactions of a new site: dated ones three to a second, some
// settled only, and some that never said when they happened (the statement's end).
func mixedHistory(t *testing.T, n int) rewardstore.Site {
	t.Helper()
	site := newSite()
	base := time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)
	txs := make([]flexv1.RewardTransaction, 0, n)
	for i := range n {
		tx := flexv1.RewardTransaction{ID: uuid.NewString(), Type: "flex event", CreditPence: int64(i + 1), FlexWh: ptr.To(int64(i))}
		switch {
		case i%7 == 6:
		case i%4 == 3:
			tx.SettlementDate = base.AddDate(0, 0, -i).Format(time.DateOnly)
		default:
			tx.StartTime = &metav1.Time{Time: base.Add(time.Duration(i/3) * time.Minute)}
		}
		txs = append(txs, tx)
	}
	if err := store.AppendMany(context.Background(), site, txs, rewardstore.SourceAPI); err != nil {
		t.Fatal(err)
	}
	return site
}

// walk reads p's history as a reader of the whole history does: PageWithBalance's first
// batch, then PageAfter from the last row's position until a batch comes back short.
func walk(t *testing.T, site rewardstore.Site, p rewardstore.Page, batch int) []flexv1.RewardTransaction {
	t.Helper()
	ctx := context.Background()
	var (
		got  []flexv1.RewardTransaction
		last rewardstore.Position
	)
	row := func(r *rewardstore.PageRow) {
		got = append(got, transactionOf(r))
		last = r.Position()
	}
	first := p
	first.Limit = batch
	if _, err := store.PageWithBalance(ctx, site, first, row); err != nil {
		t.Fatal(err)
	}
	n := len(got)
	for n == batch {
		var err error
		if n, err = store.PageAfter(ctx, site, rewardstore.Page{Limit: batch, Since: p.Since, Until: p.Until}, last, row); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// Walking a history batch by batch from positions answers Page's whole history, field for
// field and in its order, whatever the batch: across ties of a second, settled-only
// transactions and undated ones, from an offset, and within since and until.
func TestPageAfterWalksTheStatement(t *testing.T) {
	site := mixedHistory(t, 40)
	for _, p := range []rewardstore.Page{
		{},
		{Offset: 5},
		{Since: time.Date(2026, 4, 20, 0, 0, 0, 0, time.UTC), Until: time.Date(2026, 5, 4, 9, 7, 0, 0, time.UTC)},
	} {
		want := p
		want.Limit = 1000
		whole, err := store.Page(context.Background(), site, want)
		if err != nil {
			t.Fatal(err)
		}
		for _, batch := range []int{1, 2, 3, 7, 39, 40, 41} {
			t.Run(fmt.Sprintf("offset %d since %v batch %d", p.Offset, !p.Since.IsZero(), batch), func(t *testing.T) {
				got := walk(t, site, p, batch)
				if len(got) != len(whole) {
					t.Fatalf("%d transactions, want %d", len(got), len(whole))
				}
				for i := range whole {
					g, _ := json.Marshal(got[i])
					w, _ := json.Marshal(whole[i])
					if string(g) != string(w) {
						t.Fatalf("transaction %d:\n got %s\nwant %s", i, g, w)
					}
				}
			})
		}
	}
}

// A batch read by position costs the reader allocations per batch, not per transaction, as
// PageWithBalance's page does: a long history walked in batches leaves nothing of its rows.
func TestPageAfterAllocatesPerBatchNotPerRow(t *testing.T) {
	ctx := context.Background()
	site := mixedHistory(t, 200)
	var start rewardstore.Position
	if _, err := store.PageWithBalance(ctx, site, rewardstore.Page{Limit: 1}, func(r *rewardstore.PageRow) { start = r.Position() }); err != nil {
		t.Fatal(err)
	}
	allocs := func(limit int) float64 {
		return testing.AllocsPerRun(20, func() {
			if _, err := store.PageAfter(ctx, site, rewardstore.Page{Limit: limit}, start, func(*rewardstore.PageRow) {}); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(10), allocs(150)
	t.Logf("allocations of a batch: %.0f for 150 transactions, %.0f for 10", large, small)
	if perRow := (large - small) / (150 - 10); perRow >= 1 {
		t.Errorf("a batch of 150 allocates %.0f times, of 10 %.0f: %.1f allocations a row, want fewer than one", large, small, perRow)
	}
}

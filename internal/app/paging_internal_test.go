package app

import (
	"math"
	"testing"
)

// FuzzPagingWindow fuzzes the page a Paging cuts from a list, for every limit and offset the
// doors accept (limit 1..5000, offset >= 0; internal/restapi's FuzzQueryInt holds them to
// that): the items an offset and a limit select, within the list, and page numbers that count
// from 1. (It was the page window check of the facade's FuzzQueryInt.)
func FuzzPagingWindow(f *testing.F) {
	for _, seed := range [][2]int{{10, 0}, {1, 0}, {5000, 0}, {100, 250}, {1, math.MaxInt}, {5000, math.MaxInt}, {3, 7}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, limit, offset int) {
		if limit < 1 || limit > 5000 || offset < 0 {
			return // refused by the doors with a 422
		}
		for _, total := range []int{0, 1, limit - 1, limit, limit + 1, offset, offset + 1, 2*limit + 3} {
			if total >= 0 && total <= 1<<20 {
				checkPage(t, total, limit, offset)
			}
		}
	})
}

// checkPage checks the window Paging{limit, offset} gives over total items.
func checkPage(t *testing.T, total, limit, offset int) {
	t.Helper()
	p := Paging{Limit: limit, Offset: offset}.window(total)
	wantFrom, wantTo := min(offset, total), total
	if offset < total && total-offset > limit {
		wantTo = offset + limit
	}
	switch {
	case p.from != wantFrom || p.to != wantTo:
		t.Fatalf("window(%d, %d, %d) selects [%d, %d), want [%d, %d)", total, limit, offset, p.from, p.to, wantFrom, wantTo)
	case p.totalPages < 0 || p.totalPages*limit < total || (total > 0 && (p.totalPages-1)*limit >= total) ||
		(total == 0) != (p.totalPages == 0):
		t.Fatalf("window(%d, %d, %d): %d pages", total, limit, offset, p.totalPages)
	case p.number < 1 || (offset < math.MaxInt && p.number != offset/limit+1):
		t.Fatalf("window(%d, %d, %d): page number %d", total, limit, offset, p.number)
	}
}

package readings

import (
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/settlement"
)

// keyed keeps one row per key, the last sent, in key order (ON CONFLICT cannot change a row
// twice in one statement, and the order keeps two batches from deadlocking).
func TestKeyed(t *testing.T) {
	t0 := time.Date(2026, 4, 14, 17, 0, 0, 0, time.UTC)
	t30 := t0.Add(30 * time.Minute)
	r := func(site, asset string, label settlement.Label, start, end time.Time, v float64, order int) row {
		return row{Reading: Reading{AssetID: asset, Label: label, Start: start, End: end, Value: v}, siteID: site, order: order}
	}
	in := []row{
		r("s", "b", settlement.SolarPowerKW, t0, t30, 1, 0),
		r("s", "a", settlement.BoundaryImportKW, t0, t30, 2, 1),
		// The same instant in another zone is the same key: the later one counts.
		r("s", "b", settlement.SolarPowerKW, t0.In(time.FixedZone("", 3600)), t30, 3, 2),
		r("s", "a", settlement.BoundaryImportKW, t0, t30.Add(time.Minute), 4, 3),
		r("s", "a", settlement.BoundaryImportKW, t0, t30, 5, 4),
	}
	got := keyed(in)
	want := []float64{5, 4, 3}
	if len(got) != len(want) {
		t.Fatalf("keyed kept %d rows, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Value != w {
			t.Errorf("row %d = %+v, want value %g", i, got[i], w)
		}
	}
}

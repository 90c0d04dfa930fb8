package openadr

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flexsite/flexsite/internal/app/vtn"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/openadr/oadrtest"
	"github.com/flexsite/flexsite/internal/prices"
)

// TestEventAndItsNotificationsAreTheDocuments: an event of price_curve (a price declared for
// its first half-hour only) and the notifications of its issue and cancellation validate
// against the document's event and notification schemas; one interval per half-hour.
func TestEventAndItsNotificationsAreTheDocuments(t *testing.T) {
	c, err := oadrtest.Load("http://localhost")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 6, 1, 17, 0, 0, 0, time.UTC)
	e := vtn.Event{Issued: dispatchstore.Issued{EventID: uuid.New(), FlexEvent: "fe", SiteID: "s", AssetID: "a",
		MarketID: "price_curve", Proposition: "price_curve", Status: dispatch.Requested, LevelKW: -7.4,
		From: start, To: start.Add(90 * time.Minute), IssuedAt: start.Add(-time.Hour), UpdatedAt: start.Add(-time.Hour)},
		Prices: []prices.Price{{Start: start, Centi: 12345}}}
	shape := EventShape(e)
	if len(shape.Intervals) != 3 {
		t.Fatalf("intervals: %d, want 3 (one per half-hour)", len(shape.Intervals))
	}
	if len(shape.Intervals[0].Payloads) != 2 || len(shape.Intervals[1].Payloads) != 1 {
		t.Fatalf("a PRICE payload only where a price is declared: %+v", shape.Intervals)
	}
	if d := *shape.IntervalPeriod.Duration; d != "PT1H30M" {
		t.Fatalf("duration %s", d)
	}
	raw, err := json.Marshal(shape)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckSchema("event", raw); err != nil {
		t.Fatalf("event: %v\n%s", err, raw)
	}
	for _, op := range []oadr.NotificationOperation{"POST", "DELETE"} {
		body, err := eventNotification(op, shape)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.CheckSchema("notification", body); err != nil {
			t.Fatalf("notification: %v\n%s", err, body)
		}
	}
}

func TestISODurations(t *testing.T) {
	for s, want := range map[string]time.Duration{"PT1H": time.Hour, "PT30M": 30 * time.Minute, "P1D": 24 * time.Hour,
		"P1W": 7 * 24 * time.Hour, "P1DT2H": 26 * time.Hour, "PT90M": 90 * time.Minute, "PT3600S": time.Hour} {
		if got, ok := parseISODuration(s); !ok || got != want {
			t.Errorf("%s: %v %v, want %v", s, got, ok, want)
		}
		if back, _ := parseISODuration(isoDuration(want)); back != want {
			t.Errorf("%v does not read back: %s", want, isoDuration(want))
		}
	}
	for _, s := range []string{"", "P", "PT", "P1M", "P1Y", "PT1.5H", "1H", "P1DT", "-PT1H"} {
		if _, ok := parseISODuration(s); ok {
			t.Errorf("%q taken", s)
		}
	}
}

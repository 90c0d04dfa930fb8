package openadr

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flexsite/flexsite/internal/app/flexevents"
	"github.com/flexsite/flexsite/internal/app/vtn"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/prices"
)

// The events' Appender writes what encoding/json's Encoder writes of the same events, byte
// for byte: the shapes EventShape and flexEventShape make, and an event with every optional
// field, values that need escaping or compacting, and times that are not whole UTC seconds.
func TestEventsAnswerMatchesEncodingJSON(t *testing.T) {
	start := time.Date(2026, 6, 1, 17, 0, 0, 0, time.UTC)
	issued := dispatchstore.Issued{EventID: uuid.New(), FlexEvent: "fe", SiteID: "s", AssetID: "a",
		MarketID: "limited_pause", Proposition: "limited_pause", Status: dispatch.Requested, LevelKW: 0,
		From: start, To: start.Add(time.Hour), IssuedAt: start.Add(-time.Hour).Add(123456 * time.Microsecond),
		UpdatedAt: start.Add(-time.Minute)}
	priced := issued
	priced.Proposition, priced.MarketID, priced.LevelKW, priced.To = "price_curve", "price_curve", -7.4, start.Add(90*time.Minute)
	tiny := issued
	tiny.LevelKW = 1e-7
	london, err := time.LoadLocation("Europe/London")
	if err != nil {
		t.Fatal(err)
	}
	full := EventShape(vtn.Event{Issued: priced, Prices: []prices.Price{{Start: start, Centi: 12345}}})
	priority, freq, yes := 3, int32(2), true
	reading, dur := "DIRECT_READ", "PT5M"
	full.Priority = &priority
	full.IntervalPeriod.RandomizeStart = &dur
	full.IntervalPeriod.Start = start.In(london).Add(7)
	*full.ReportDescriptors = append(*full.ReportDescriptors, oadr.ReportDescriptor{PayloadType: "<USAGE&>",
		Aggregate: &yes, Frequency: &freq, Historical: &yes, NumIntervals: &freq, ReadingType: &reading, Repeat: &freq,
		StartInterval: &freq, Targets: &[]oadr.ValuesMap{{Type: "RESOURCE_NAME", Values: nil}}})
	var spaced, html oadr.ValuesMap_Values_Item
	if err := spaced.UnmarshalJSON([]byte(`{ "x" : [1, 2] }`)); err != nil {
		t.Fatal(err)
	}
	if err := html.UnmarshalJSON([]byte(`"a<b>&c é"`)); err != nil {
		t.Fatal(err)
	}
	*full.Targets = append(*full.Targets, oadr.ValuesMap{Type: "MIXED", Values: []oadr.ValuesMap_Values_Item{spaced, html}})
	var empty oadr.Event
	empty.ProgramID = "p"
	var nullDescriptors oadr.Event
	nullDescriptors.PayloadDescriptors = new([]oadr.EventPayloadDescriptor)
	nullDescriptors.ReportDescriptors = new([]oadr.ReportDescriptor)
	nullDescriptors.Targets = new([]oadr.ValuesMap)
	nullDescriptors.Intervals = []oadr.Interval{{Id: 1}}
	cases := map[string]eventsAnswer{
		"none":          {},
		"nil":           nil,
		"dispatches":    {EventShape(vtn.Event{Issued: issued}), EventShape(vtn.Event{Issued: tiny}), EventShape(vtn.Event{Issued: priced})},
		"a flex event":  {flexEventShape(flexevents.EventRecord{ID: "fe-1", Proposition: "limited_pause", StartAt: "2026-06-01T17:00:00Z", EndAt: "2026-06-01T18:00:00Z", Direction: "turn_down", RatePencePerKWh: 25.5, SiteIDs: []string{"s1", "s2"}})},
		"every field":   {full},
		"empty":         {empty},
		"null in lists": {nullDescriptors},
	}
	for name, in := range cases {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode([]oadr.Event(in)); err != nil {
			t.Fatal(err)
		}
		if got := in.AppendJSON(nil); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want.Bytes())
		}
	}
}

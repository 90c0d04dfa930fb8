package rewardspage

import (
	"maps"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/web/flexchart"
	"github.com/flexsite/flexsite/internal/web/webtest"
)

// Under a flex event, the page lists what the household's devices did; an event shown for
// them alone (not settled yet) has no sentence, chart or table.
func TestPageShowsWhatTheDevicesDid(t *testing.T) {
	var buf strings.Builder
	v := &view{Title: "Your rewards", FlexEvents: []flexchart.Event{{ID: "flex-event-1", Day: "Tuesday 17 November 2026",
		Devices: []string{"Your charger was paused from 17:30 to 18:30", "Your battery was discharged from 17:30 to 18:30"}}}}
	if err := pageTemplate.Execute(&buf, v); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, want := range []string{`<ul class="flex-devices">`, "<li>Your charger was paused from 17:30 to 18:30</li>",
		"<li>Your battery was discharged from 17:30 to 18:30</li>", "Tuesday 17 November 2026"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, unwanted := range []string{`class="flex-sentence"`, "<figure>", "Half-hour figures"} {
		if strings.Contains(page, unwanted) {
			t.Errorf("the page shows %q for an event without a settlement", unwanted)
		}
	}
}

// The rewards page's headers: its policy (forms to itself and, after the last, to the
// redirect's origin), never framed, in a browsing context group of its own.
func TestPageHeaders(t *testing.T) {
	w := httptest.NewRecorder()
	setHeaders(w, "https://app.example.com/done")
	want := map[string]string{
		"Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self' " +
			"https://app.example.com; frame-ancestors 'none'; base-uri 'none'",
		"X-Frame-Options": "DENY", "Cross-Origin-Opener-Policy": "same-origin", "Referrer-Policy": "no-referrer",
		"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
	if got := webtest.SecurityHeaders(w.Header()); !maps.Equal(got, want) {
		t.Errorf("headers %v, want %v", got, want)
	}
}

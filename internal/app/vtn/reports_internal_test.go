package vtn

import (
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/dispatch"
)

// The operating-state table of docs/openadr.md, "What a report does".
func TestStatusOfOperatingStates(t *testing.T) {
	start := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	before, inside := start.Add(-time.Minute), start.Add(time.Minute)
	for _, tc := range []struct {
		state string
		at    time.Time
		want  dispatch.Status
	}{
		{"NORMAL", before, dispatch.Accepted},
		{"RUNNING_CURTAILED", before, dispatch.Accepted},
		{"IDLE_OPTED_OUT", before, dispatch.Rejected},
		{"RUNNING_OPTED_OUT", inside, dispatch.Rejected},
		{"ERROR", before, dispatch.Failed},
		{"SGD_ERROR_CONDITION", inside, dispatch.Failed},
		{"RUNNING_CURTAILED", inside, dispatch.Executed},
		{"IDLE_CURTAILED", start, dispatch.Executed},
		{"RUNNING_HEIGHTENED", inside, dispatch.Executed},
		{"IDLE_HEIGHTENED", inside, dispatch.Executed},
		{"NORMAL", inside, ""},
		{"IDLE_NORMAL", inside, ""},
		{"RUNNING_NORMAL", start, ""},
	} {
		got, ok := statusOf(tc.state, tc.at, start)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s at %s: %q %v, want %q", tc.state, tc.at, got, ok, tc.want)
		}
	}
}

package household

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// A household's budget of meter changes (docs/hosted-flow.md, "Find my meter"). A household
// (a component token) may change its site's MPAN, through the hosted flow's address step or a
// PATCH of its site, at most MeterChangesPerDay times in any MeterChangeWindow: each change
// moves the MPAN's claim, so a household that kept picking its neighbours' meters would take
// each neighbour's MPAN from its household in turn. The organisation's own API clients are not
// counted. The changes are recorded on the Site itself (flexv1.MeterChangesAnnotation), in the
// same write as the change, so every replica judges the same history.
const (
	MeterChangesPerDay = 3
	MeterChangeWindow  = 24 * time.Hour
	// MeterChangesCode is the code of the refusal past the budget (a 429 with Retry-After):
	// the hosted flow words it (app.Error.Code).
	MeterChangesCode = "meter_changes"
)

// MeterChangesRefusal is the refusal past the budget, as the REST API tells it.
var MeterChangesRefusal = fmt.Sprintf("This site's meter has been changed %d times in the last %d hours, "+
	"as often as a household may; retry later", MeterChangesPerDay, int(MeterChangeWindow.Hours()))

// meterChanges are the recorded changes still inside the window at now, as recorded. A
// recorded time that is not one, or lies further ahead than the window (no clock is that
// wrong), is not counted.
func meterChanges(site *flexv1.Site, now time.Time) []time.Time {
	var out []time.Time
	for _, field := range strings.Fields(site.Annotations[flexv1.MeterChangesAnnotation]) {
		sec, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			continue
		}
		at := time.Unix(sec, 0)
		if at.After(now.Add(-MeterChangeWindow)) && !at.After(now.Add(MeterChangeWindow)) {
			out = append(out, at)
		}
	}
	return out
}

// MeterChangeWait is how long the household of site must wait before it may change the
// site's MPAN at now: 0 while its budget holds, else until enough of its counted changes have
// left the window (at least a second).
func MeterChangeWait(site *flexv1.Site, now time.Time) time.Duration {
	changes := meterChanges(site, now)
	if len(changes) < MeterChangesPerDay {
		return 0
	}
	slices.SortFunc(changes, time.Time.Compare)
	// One change more than the budget allows must leave: the (n-budget+1)th oldest.
	return max(changes[len(changes)-MeterChangesPerDay].Add(MeterChangeWindow).Sub(now), time.Second)
}

// SpendMeterChange spends one change of the budget of site's household at now, recording it on
// site (only the changes the budget still counts are kept), and answers 0; or, past the
// budget, changes nothing and answers how long to wait (MeterChangeWait).
func SpendMeterChange(site *flexv1.Site, now time.Time) (wait time.Duration) {
	if wait := MeterChangeWait(site, now); wait > 0 {
		return wait
	}
	changes := append(meterChanges(site, now), now)
	slices.SortFunc(changes, time.Time.Compare)
	if n := len(changes); n > MeterChangesPerDay {
		changes = changes[n-MeterChangesPerDay:]
	}
	fields := make([]string, len(changes))
	for i, c := range changes {
		fields[i] = strconv.FormatInt(c.Unix(), 10)
	}
	if site.Annotations == nil {
		site.Annotations = map[string]string{}
	}
	site.Annotations[flexv1.MeterChangesAnnotation] = strings.Join(fields, " ")
	return 0
}

// RetryAfter is a wait in whole seconds, rounded up, as a Retry-After header says it.
func RetryAfter(wait time.Duration) string {
	return strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10)
}

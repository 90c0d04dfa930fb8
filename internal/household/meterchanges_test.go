package household_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
)

func TestMeterChangeBudget(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) string { return strconv.FormatInt(now.Add(-d).Unix(), 10) }
	site := func(recorded ...string) *flexv1.Site {
		s := &flexv1.Site{}
		if recorded != nil {
			s.ObjectMeta = metav1.ObjectMeta{Annotations: map[string]string{flexv1.MeterChangesAnnotation: strings.Join(recorded, " ")}}
		}
		return s
	}
	for _, c := range []struct {
		name string
		site *flexv1.Site
		want time.Duration
	}{
		{"none recorded", site(), 0},
		{"two in the window", site(ago(time.Hour), ago(time.Minute)), 0},
		{"three in the window", site(ago(3*time.Hour), ago(2*time.Hour), ago(time.Hour)), 21 * time.Hour},
		{"three, recorded out of order", site(ago(time.Hour), ago(3*time.Hour), ago(2*time.Hour)), 21 * time.Hour},
		{"one of three has left the window", site(ago(25*time.Hour), ago(2*time.Hour), ago(time.Hour)), 0},
		{"exactly a window ago has left it", site(ago(24*time.Hour), ago(2*time.Hour), ago(time.Hour)), 0},
		{"four in the window (edited by hand)", site(ago(4*time.Hour), ago(3*time.Hour), ago(2*time.Hour), ago(time.Hour)), 21 * time.Hour},
		{"junk is not counted", site("x", "-", ago(2*time.Hour), ago(time.Hour)), 0},
		{"a time beyond the window ahead is not counted", site(ago(-48*time.Hour), ago(2*time.Hour), ago(time.Hour)), 0},
		{"the last second", site(ago(24*time.Hour-time.Second), ago(2*time.Hour), ago(time.Hour)), time.Second},
	} {
		if got := household.MeterChangeWait(c.site, now); got != c.want {
			t.Errorf("%s: MeterChangeWait = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSpendMeterChange(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s := &flexv1.Site{}
	for i := range household.MeterChangesPerDay {
		if wait := household.SpendMeterChange(s, now.Add(time.Duration(i)*time.Minute)); wait != 0 {
			t.Fatalf("change %d: wait %v, want none", i+1, wait)
		}
	}
	spent := s.Annotations[flexv1.MeterChangesAnnotation]
	later := now.Add(time.Duration(household.MeterChangesPerDay) * time.Minute)
	if wait := household.SpendMeterChange(s, later); wait != household.MeterChangeWindow-time.Duration(household.MeterChangesPerDay)*time.Minute {
		t.Errorf("past the budget: wait %v", wait)
	}
	if got := s.Annotations[flexv1.MeterChangesAnnotation]; got != spent {
		t.Errorf("a refused change was recorded: %q, was %q", got, spent)
	}
	// A day on, the old changes are dropped as a new one is recorded: the annotation stays small.
	dayOn := now.Add(household.MeterChangeWindow + time.Hour)
	household.SpendMeterChange(s, dayOn)
	if got, want := s.Annotations[flexv1.MeterChangesAnnotation], strconv.FormatInt(dayOn.Unix(), 10); got != want {
		t.Errorf("annotation %q, want %q", got, want)
	}
	for _, c := range []struct {
		wait time.Duration
		want string
	}{{time.Second, "1"}, {1500 * time.Millisecond, "2"}, {21 * time.Hour, "75600"}} {
		if got := household.RetryAfter(c.wait); got != c.want {
			t.Errorf("RetryAfter(%v) = %q, want %q", c.wait, got, c.want)
		}
	}
}

package claim

import (
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	made := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	const grace = time.Minute
	cases := []struct {
		name string
		held bool
		at   time.Time
		want Standing
	}{
		{"held, however old", true, made.Add(24 * time.Hour), Held},
		{"not held, just made", false, made, Pending},
		{"not held, within the grace", false, made.Add(grace - time.Nanosecond), Pending},
		{"not held, at the end of the grace", false, made.Add(grace), Stale},
		{"not held, long after", false, made.Add(time.Hour), Stale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Judge(tc.held, made, grace, tc.at); got != tc.want {
				t.Errorf("Judge = %v, want %v", got, tc.want)
			}
		})
	}
}

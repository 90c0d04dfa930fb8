package resourceversion

import "testing"

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		have, want      string
		notOlder, older bool
	}{
		{"10", "10", true, false},
		{"11", "10", true, false},
		{"9", "10", false, true},
		{"100", "99", true, false}, // numbers, not strings
		{"abc", "abc", true, false},
		{"abc", "10", false, false}, // unparsable: equal or not, never known older
		{"10", "", false, false},
	} {
		if got := NotOlder(c.have, c.want); got != c.notOlder {
			t.Errorf("NotOlder(%q, %q) = %v, want %v", c.have, c.want, got, c.notOlder)
		}
		if got := Older(c.have, c.want); got != c.older {
			t.Errorf("Older(%q, %q) = %v, want %v", c.have, c.want, got, c.older)
		}
	}
}

package validation_test

import (
	"testing"

	"github.com/flexsite/flexsite/internal/validation"
)

func TestSubscriptionsFull(t *testing.T) {
	for _, c := range []struct {
		have, max int
		full      bool
	}{
		{0, 25, false},
		{24, 25, false},
		{25, 25, true},
		{120, 25, true}, // made before the cap, or racing: still full
		{0, 1, false},
		{1, 1, true},
	} {
		err := validation.SubscriptionsFull(c.have, c.max)
		if (err != nil) != c.full {
			t.Errorf("SubscriptionsFull(%d, %d) = %v, want full %v", c.have, c.max, err, c.full)
		}
	}
	want := "The organisation has 25 notification subscriptions, the most it may have; delete one before adding another"
	if err := validation.SubscriptionsFull(25, 25); err == nil || err.Error() != want {
		t.Errorf("SubscriptionsFull(25, 25) = %v, want %q", err, want)
	}
}

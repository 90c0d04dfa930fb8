package units

import (
	"math"
	"testing"

	"k8s.io/utils/ptr"
)

func TestFromKilo(t *testing.T) {
	for _, c := range []struct {
		kilo float64
		want int64
	}{
		{0, 0}, {7.4, 7400}, {13.5, 13500}, {5, 5000}, {0.001, 1}, {0.0004, 0}, {0.0005, 1},
		{-1.2345, -1235}, {1.2344999, 1234}, {math.Inf(1), 9e18}, {-MaxKilo * 2, -9e18},
	} {
		if got := FromKilo(&c.kilo); got == nil || *got != c.want {
			t.Errorf("FromKilo(%v) = %v, want %d", c.kilo, got, c.want)
		}
	}
	if FromKilo(nil) != nil {
		t.Error("FromKilo(nil) is not nil")
	}
}

func TestToKilo(t *testing.T) {
	if got := ToKilo(ptr.To[int64](7400)); got == nil || *got != 7.4 {
		t.Errorf("ToKilo(7400) = %v, want 7.4", got)
	}
	if ToKilo(nil) != nil {
		t.Error("ToKilo(nil) is not nil")
	}
}

// A kilo-value with at most three decimals, as the API documents them, survives the trip
// through whole units unchanged.
func TestRoundTrip(t *testing.T) {
	for _, s := range []float64{0, 0.001, 0.1, 3.2, 7.4, 9.5, 13.5, 22.123, 1234.567, 99999.999} {
		if got := *ToKilo(FromKilo(&s)); got != s {
			t.Errorf("%v came back as %v", s, got)
		}
	}
}

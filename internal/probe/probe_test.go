package probe

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Parse keeps the wanted series only, with their labels (escapes read) and values.
func TestParse(t *testing.T) {
	text := `# HELP x
# TYPE workqueue_depth gauge
workqueue_depth{name="site"} 3
workqueue_depth{name="asset",note="a \"b\"\nc"} 4
go_gc_duration_seconds 0.5
apiserver_watch_cache_capacity{resource="sites.flexsite.io"} 100
`
	samples, err := Parse(strings.NewReader(text), []string{"workqueue_depth", "apiserver_watch_cache_capacity"})
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 3 || samples[1].Labels["note"] != "a \"b\"\nc" || samples[2].Labels["resource"] != "sites.flexsite.io" {
		t.Fatalf("parsed %+v", samples)
	}
	if got := SumOf(samples, "workqueue_depth"); got != 7 {
		t.Fatalf("sum %v, want 7", got)
	}
}

// Retry answers nil once f does, and f's last error when the time is up.
func TestRetry(t *testing.T) {
	calls := 0
	if err := Retry(context.Background(), time.Minute, time.Millisecond, func() error {
		if calls++; calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || calls != 3 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
	want := errors.New("never")
	if err := Retry(context.Background(), 0, time.Millisecond, func() error { return want }); !errors.Is(err, want) {
		t.Fatalf("err %v, want %v", err, want)
	}
}

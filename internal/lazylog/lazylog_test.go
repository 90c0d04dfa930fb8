package lazylog

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

func capture(lines *[]string) logr.Logger {
	return funcr.NewJSON(func(obj string) { *lines = append(*lines, obj) },
		funcr.Options{LogCaller: funcr.All, Verbosity: 1})
}

// Lines carry the same names, values (in order), levels and caller as without the wrapper.
func TestSameLinesAsTheWrappedLogger(t *testing.T) {
	write := func(l logr.Logger) {
		base := l.WithName("ctrl").WithValues("controller", "site")
		r := base.WithValues("name", "mpan-1", "reconcileID", "r1")
		r.Info("reconciled", "took", 3)
		r.V(1).Info("detail")
		r.V(2).Info("not written")
		r.WithName("sub").Error(errors.New("boom"), "failed", "retry", true)
		base.Info("other reconcile") // the values of r are r's only
		l.WithCallDepth(0).Info("plain")
	}
	var want, got []string
	write(capture(&want))
	write(New(capture(&got)))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines differ:\n got %s\nwant %s", strings.Join(got, "\n    "), strings.Join(want, "\n    "))
	}
	if len(want) != 5 || !strings.Contains(want[0], `"file":"lazylog_test.go"`) {
		t.Errorf("unexpected lines: %v", want)
	}
}

// WithValues encodes nothing: a logger per reconcile costs one small slice.
func TestWithValuesIsCheap(t *testing.T) {
	var lines []string
	l := New(capture(&lines)).WithValues("controller", "site")
	allocs := testing.AllocsPerRun(100, func() {
		_ = l.WithValues("name", "mpan-1", "reconcileID", "r1")
	})
	if allocs > 3 {
		t.Errorf("WithValues allocates %v times", allocs)
	}
}

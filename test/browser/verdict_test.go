package browser

import (
	"errors"
	"strings"
	"testing"
)

func TestMissingVerdict(t *testing.T) {
	missing := errors.New("chromium is not installed: run hack/ensure-chromium.sh")
	t.Setenv("CI", "true")
	if fail, msg := MissingVerdict(missing); !fail || !strings.Contains(msg, "CI=true") || !strings.Contains(msg, "ensure-chromium") {
		t.Errorf("in CI: fail=%v %q", fail, msg)
	}
	t.Setenv("CI", "")
	if fail, msg := MissingVerdict(missing); fail || !strings.HasPrefix(msg, "skipping the browser tests") {
		t.Errorf("elsewhere: fail=%v %q", fail, msg)
	}
}

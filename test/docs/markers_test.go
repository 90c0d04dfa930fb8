package docs

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A merge resolved in haste can commit its conflict markers; the Go compiler catches them in
// code, nothing catches them in prose. Two tables of docs/ carried a conflict for a whole
// issue before this test: a reader saw both sides and the markers.
func TestNoConflictMarkers(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	checked := 0
	for _, name := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if !strings.HasSuffix(name, ".md") && !strings.HasSuffix(name, ".yaml") && !strings.HasSuffix(name, ".tpl") {
			continue
		}
		f, err := os.Open(filepath.Join(root, name))
		if err != nil {
			continue // deleted in the work tree
		}
		checked++
		s := bufio.NewScanner(f)
		s.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for line := 1; s.Scan(); line++ {
			text := s.Text()
			if strings.HasPrefix(text, "<<<<<<< ") || strings.HasPrefix(text, ">>>>>>> ") || text == "=======" {
				t.Errorf("%s:%d: a merge conflict marker: %q", name, line, text)
			}
		}
		_ = f.Close() // read only: nothing to lose
	}
	if checked == 0 {
		t.Fatal("checked no file: is the test run from test/docs?")
	}
}

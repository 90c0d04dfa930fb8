package docs_test

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/testenv"
)

// benchdocs runs hack/benchdocs from the repository's root.
func benchdocs(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"run", "./hack/benchdocs"}, args...)...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go run ./hack/benchdocs %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The figures of README.md and docs/performance.md are the bench's output: their generated
// blocks must be what hack/benchdocs makes of the committed bench/results.json (it also
// refuses a topic naming a figure the bench does not write, and a target no table shows).
func TestBenchFiguresAreTheCommittedRun(t *testing.T) {
	benchdocs(t, testenv.RepoRoot(), "-check")
}

var (
	figureName  = regexp.MustCompile("`([a-z][a-z0-9_-]*\\.[a-z0-9_*<>-]+)`")
	placeholder = regexp.MustCompile(`<[^>]*>`)
)

// A figure named in a table of the docs (a column headed "Figure") is one the bench writes:
// cmd/flexsite-bench's calls of its report's add and addTarget, read by hack/benchdocs
// -figures from the source, so a renamed or dropped figure fails here, not in a reader's hands.
func TestFigureTablesNameFiguresTheBenchWrites(t *testing.T) {
	root := testenv.RepoRoot()
	var patterns []string
	for _, line := range strings.Split(strings.TrimSpace(benchdocs(t, root, "-figures")), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			patterns = append(patterns, f[1])
		}
	}
	if len(patterns) < 50 {
		t.Fatalf("hack/benchdocs -figures found %d figures in the bench's source: is it still reading it?", len(patterns))
	}
	named := 0
	for _, page := range pages(t, root) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for _, c := range figureCells(string(data)) {
			for _, m := range figureName.FindAllStringSubmatch(c.text, -1) {
				named++
				name := placeholder.ReplaceAllString(m[1], "*")
				if !writtenByBench(patterns, name) {
					t.Errorf("%s:%d: the figure %s is not one the bench writes (cmd/flexsite-bench; `go run ./hack/benchdocs -figures` lists them)",
						rel, c.line, m[1])
				}
			}
		}
	}
	if named < 20 {
		t.Errorf("only %d figures named in the docs' tables: is the table reader still right?", named)
	}
}

type cell struct {
	line int
	text string
}

// figureCells answers the cells under a "Figure" heading of every Markdown table of text.
func figureCells(text string) []cell {
	var out []cell
	col := -1
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(trimmed, "|") {
			col = -1
			continue
		}
		cells := strings.Split(strings.Trim(trimmed, "|"), "|")
		if col == -1 { // a table's heading row
			col = -2
			for j, c := range cells {
				if strings.HasPrefix(strings.ToLower(strings.TrimSpace(c)), "figure") {
					col = j
				}
			}
			continue
		}
		if col >= 0 && col < len(cells) {
			out = append(out, cell{line: i + 1, text: cells[col]})
		}
	}
	return out
}

// writtenByBench reports whether name (with * where a doc names several) may be one of the
// bench's figures (patterns with * where the source cannot tell).
func writtenByBench(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, strings.ReplaceAll(name, "*", "x")); ok {
			return true
		}
		if ok, _ := path.Match(name, strings.ReplaceAll(p, "*", "x")); ok {
			return true
		}
	}
	return false
}

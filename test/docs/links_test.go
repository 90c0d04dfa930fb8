// Package docs_test checks the project's Markdown: every relative link of the README, the
// pages under docs/ and the chart's README resolves to a file of the repository, and every
// #anchor to a heading of the page it names (as GitHub derives anchors from headings).
package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/flexsite/flexsite/internal/testenv"
)

var (
	// link matches [text](target) and ![alt](target); the target has no spaces.
	link     = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	heading  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	codeSpan = regexp.MustCompile("`[^`]*`")
	linkText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// pages are the Markdown files a reader walks between.
func pages(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md"), filepath.Join(root, "charts", "flexsite", "README.md")}, docs...)
}

// stripCode removes fenced blocks and inline code spans, where brackets are not links.
func stripCode(text string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			out = append(out, "")
			continue
		}
		if fenced {
			out = append(out, "")
			continue
		}
		out = append(out, codeSpan.ReplaceAllString(line, ""))
	}
	return out
}

// slug is GitHub's anchor for a heading: lower case, spaces to hyphens, and every character
// but letters, digits, hyphens and underscores dropped.
func slug(h string) string {
	h = linkText.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(t *testing.T, file string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range stripCodeFences(string(data)) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[s+"-"+strconv.Itoa(n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// stripCodeFences drops fenced blocks only (headings keep their code spans' text).
func stripCodeFences(text string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, line)
		}
	}
	return out
}

func TestRelativeLinksResolve(t *testing.T) {
	root := testenv.RepoRoot()
	checked := 0
	for _, page := range pages(t, root) {
		data, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, page)
		for i, line := range stripCode(string(data)) {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				path, anchor, _ := strings.Cut(target, "#")
				file := page
				if path != "" {
					file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
					if _, err := os.Stat(file); err != nil {
						t.Errorf("%s:%d: %s: %v", rel, i+1, target, err)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(file, ".md") {
					t.Errorf("%s:%d: %s: an anchor into a file that is not Markdown", rel, i+1, target)
					continue
				}
				if !anchors(t, file)[anchor] {
					t.Errorf("%s:%d: %s: no heading of %s has the anchor #%s", rel, i+1, target, filepath.Base(file), anchor)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("only %d relative links found: is the link pattern still right?", checked)
	}
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"A walk-through with curl (the REST API)":               "a-walk-through-with-curl-the-rest-api",
		"Changing a site's MPAN":                                "changing-a-sites-mpan",
		"Status conditions (kstatus)":                           "status-conditions-kstatus",
		"Who did what: request ids, access log, field managers": "who-did-what-request-ids-access-log-field-managers",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

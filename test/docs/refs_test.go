package docs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/testenv"
)

// A maintainer has the repository and nothing beside it: every rule a comment, a migration or
// a manifest leans on is stated in docs/, in the project's own words, and cited there as
// `docs/<page>.md, "<Section>"`. The specification the project was built from lives outside the
// repository; its file names are not citations a reader can follow.

var (
	// specName is a file name of the specification: cited without docs/ in front, it points
	// outside the repository (the pages of docs/ that share a name are cited with docs/).
	specName = regexp.MustCompile(`(?:^|[^\w.-])([\w./-]*/)?(interface|api-reference|rewards-engine|device-connection|design|dispatch|meters|hosted-flow|notifications|openadr)\.md\b`)
	// specDir is the specification's folder.
	specDir = regexp.MustCompile(`(?:^|[^\w./-])spec/[\w.-]+`)
	// outside is a path out of the checkout to the folder the specification lives in.
	outside = regexp.MustCompile(`(?:\.\./|/work/)shared\b`)
	// docCitation is `docs/<page>.md, "<Section>"` (also `docs/<page>.md "<Section>"`,
	// `docs/<page>.md ("<Section>")` and `docs/<page>.md's ("<Section>")`), in text whose
	// comment lines have been joined.
	docCitation = regexp.MustCompile(`(^|[^"\w])docs/([\w-]+)\.md(?:'s)?,?\s+\(?"([A-Z][^"]*)"`)
	// commentBreak is a line break inside a comment (Go, shell or YAML, SQL), with the next
	// line's comment marker: a citation may wrap.
	commentBreak = regexp.MustCompile(`\n[ \t]*(?://|#|--)[ \t]*`)
)

// keptSpecCopies are files kept on purpose as published upstream: they are not the project's
// words and are never edited.
var keptSpecCopies = []string{
	"internal/openadr/oadr/openadr3-3.0.1.yaml",
	"internal/openadr/oadr/NOTICE",
	"internal/restapi/apidocs/testdata/",
}

// files are the repository's files (tracked, and new ones not ignored), relative to root.
func files(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// text is the file's content, or false for a binary, missing or kept file.
func text(t *testing.T, root, name string) (string, bool) {
	t.Helper()
	for _, kept := range keptSpecCopies {
		if name == kept || strings.HasSuffix(kept, "/") && strings.HasPrefix(name, kept) {
			return "", false
		}
	}
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil || bytes.IndexByte(data, 0) >= 0 {
		return "", false // deleted in the work tree, or binary
	}
	return string(data), true
}

func lineOf(s string, offset int) int { return strings.Count(s[:offset], "\n") + 1 }

// TestNothingPointsOutside: no file outside docs/ cites the specification's files, and no file
// at all points at the folder beside the checkout.
func TestNothingPointsOutside(t *testing.T) {
	root := testenv.RepoRoot()
	checked := 0
	for _, name := range files(t, root) {
		s, ok := text(t, root, name)
		if !ok {
			continue
		}
		checked++
		for _, m := range outside.FindAllStringIndex(s, -1) {
			t.Errorf("%s:%d: %q points outside the repository: state the rule in docs/ and cite that",
				name, lineOf(s, m[0]), s[m[0]:m[1]])
		}
		if strings.HasPrefix(name, "docs/") {
			continue // the pages are docs/ itself: their own names are theirs
		}
		told := map[int]bool{} // lines already told of a specification's file
		for _, m := range specName.FindAllStringSubmatchIndex(s, -1) {
			if m[2] >= 0 && strings.HasSuffix(s[m[2]:m[3]], "docs/") {
				continue
			}
			start := m[4]
			if m[2] >= 0 {
				start = m[2]
			}
			told[lineOf(s, start)] = true
			t.Errorf("%s:%d: %q cites a file of the specification: cite docs/<page>.md, \"<Section>\" instead",
				name, lineOf(s, start), s[start:m[1]])
		}
		for _, m := range specDir.FindAllStringIndex(s, -1) {
			at := strings.Index(s[m[0]:m[1]], "spec/") + m[0]
			if told[lineOf(s, at)] {
				continue
			}
			t.Errorf("%s:%d: %q names the specification's folder, which is not in the repository",
				name, lineOf(s, at), s[at:m[1]])
		}
	}
	if checked < 500 {
		t.Errorf("only %d files read: is the listing still right?", checked)
	}
}

// TestCitedSectionsExist: each `docs/<page>.md, "<Section>"` outside docs/ names a page that
// exists and a heading of it (the quote may be the heading's start).
func TestCitedSectionsExist(t *testing.T) {
	root := testenv.RepoRoot()
	headings := map[string][]string{}
	headingsOf := func(page string) ([]string, bool) {
		if h, ok := headings[page]; ok {
			return h, h != nil
		}
		data, err := os.ReadFile(filepath.Join(root, "docs", page+".md"))
		if err != nil {
			headings[page] = nil
			return nil, false
		}
		h := []string{}
		for _, line := range stripCodeFences(string(data)) {
			if m := heading.FindStringSubmatch(line); m != nil {
				h = append(h, m[1])
			}
		}
		headings[page] = h
		return h, true
	}
	cited := 0
	for _, name := range files(t, root) {
		if strings.HasPrefix(name, "docs/") {
			continue // the pages link to each other, and test/docs checks those links
		}
		s, ok := text(t, root, name)
		if !ok {
			continue
		}
		joined := commentBreak.ReplaceAllString(s, " ")
		for _, m := range docCitation.FindAllStringSubmatch(joined, -1) {
			page, section := m[2], strings.TrimRight(m[3], ".,;: ")
			cited++
			h, ok := headingsOf(page)
			if !ok {
				t.Errorf("%s: cites docs/%s.md, which does not exist", name, page)
				continue
			}
			found := false
			for _, x := range h {
				if strings.HasPrefix(x, section) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: cites docs/%s.md, %q: no heading of that page begins so", name, page, section)
			}
		}
	}
	if cited < 50 {
		t.Errorf("only %d citations of docs/ sections found: is the pattern still right?", cited)
	}
}

// TestReferencePatterns holds the patterns to what they must and must not catch.
func TestReferencePatterns(t *testing.T) {
	spec := func(name string) string { return name + ".md" } // so this file cites nothing itself
	for _, c := range []struct {
		line string
		bad  bool
	}{
		{"// the rules (" + "spec/" + spec("dispatch") + ", \"Prices\")", true},
		{"// the record of " + spec("interface") + ".", true},
		{"-- One outbox (" + spec("design") + " decision 10)", true},
		{"// the credit of .." + "/shared/" + "spec/" + spec("rewards-engine"), true},
		{"copied from `" + "spec/" + "ocpp-1.6-SetChargingProfile.schema.json`", true},
		{"// (docs/" + spec("api") + ", \"Prices\")", false},
		{"see [notifications](../../docs/" + spec("notifications") + ")", false},
		{"// (docs/" + spec("hosted-flow") + ", \"Find my meter\")", false},
		{`kubectl patch site x --type json -p '[{"path": "/spec/mpan"}]'`, false},
		{"// the flexsite-" + spec("design") + " page", false},
	} {
		got := specName.MatchString(c.line) && !strings.Contains(specName.FindStringSubmatch(c.line)[0], "docs/") ||
			specDir.MatchString(c.line) || outside.MatchString(c.line)
		if got != c.bad {
			t.Errorf("%q: flagged %v, want %v", c.line, got, c.bad)
		}
	}
	m := docCitation.FindStringSubmatch(commentBreak.ReplaceAllString("// the rule (docs/api.md, \"The site and asset\n// lifecycle\"): x", " "))
	if m == nil || m[2] != "api" || m[3] != "The site and asset lifecycle" {
		t.Errorf("a citation wrapped over two comment lines is read as %q", m)
	}
}

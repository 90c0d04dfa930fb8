// Command benchdocs writes the bench's figures into the docs: between the markers
//
//	<!-- bench-figures:begin ID --> … <!-- bench-figures:end ID -->
//
// of README.md (ID readme: every target of the run, met or not), docs/performance.md (ID
// run: which run; one table per topic, IDs in topics.go) and the other pages a topic names
// (docs/scale.md), from bench/results.json, which
// `make bench` writes and `make bench-docs` (this command) reads. So a figure in the docs is
// the bench's output, never a copy.
//
// It refuses a table row naming a figure the bench's source (cmd/flexsite-bench) does not
// write, and a target of the bench that no row shows. -check writes nothing and fails when a
// block is not what it would write (test/docs runs it); -figures prints the figures the bench's
// source writes, a target's line starting with "target".
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
)

// pages are the files with generated blocks, and the ids each must hold.
var pages = map[string][]string{
	"README.md":             {"readme"},
	"docs/performance.md":   append([]string{"run"}, topicIDs(performancePage)...),
	"docs/scale.md":         topicIDs("docs/scale.md"),
	"docs/notifications.md": topicIDs("docs/notifications.md"),
}

// performancePage holds every topic that names no page of its own.
const performancePage = "docs/performance.md"

// topicIDs are the ids of the topics whose tables are on page.
func topicIDs(page string) []string {
	var ids []string
	for _, t := range topics {
		if t.page() == page {
			ids = append(ids, t.ID)
		}
	}
	return ids
}

func main() {
	resultsFile := flag.String("results", "bench/results.json", "The bench's report.")
	benchSrc := flag.String("bench-src", "cmd/flexsite-bench", "The bench's source, whose figures the tables may name.")
	check := flag.Bool("check", false, "Write nothing; fail when a generated block differs from what it would write.")
	list := flag.Bool("figures", false, "Print the figures the bench's source writes, one a line, and exit.")
	flag.Parse()
	if err := run(*resultsFile, *benchSrc, *check, *list); err != nil {
		fmt.Fprintln(os.Stderr, "benchdocs:", err)
		os.Exit(1)
	}
}

func run(resultsFile, benchSrc string, check, list bool) error {
	figs, err := benchFigures(benchSrc)
	if err != nil {
		return err
	}
	if list {
		for _, f := range figs {
			kind := "figure"
			if f.Target {
				kind = "target"
			}
			fmt.Printf("%s %s %s %s\n", kind, f.Pattern, f.Pos, f.Bound)
		}
		return nil
	}
	if err := checkTopics(figs); err != nil {
		return err
	}
	r, err := readResults(resultsFile)
	if err != nil {
		return err
	}
	r.code = figs
	files := make([]string, 0, len(pages))
	for file := range pages {
		files = append(files, file)
	}
	sort.Strings(files)
	// Every page is rendered before any is written: an error leaves the tree as it was.
	outs := map[string]string{}
	var stale []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		out, err := rewrite(string(data), r, pages[file])
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if out != string(data) {
			outs[file] = out
			stale = append(stale, file)
		}
	}
	if check {
		if len(stale) > 0 {
			return fmt.Errorf("the bench's figures in %s are not what %s makes: run `make bench-docs` and commit the result",
				strings.Join(stale, " and "), resultsFile)
		}
		return nil
	}
	for _, file := range stale {
		if err := os.WriteFile(file, []byte(outs[file]), 0o644); err != nil {
			return err
		}
		fmt.Printf("benchdocs: wrote %s from %s\n", file, resultsFile)
	}
	return nil
}

var marker = regexp.MustCompile(`<!-- bench-figures:(begin|end) ([a-z0-9-]+) -->`)

// rewrite replaces every generated block of text, and fails on a block it does not know, one
// left open, or one of ids missing.
func rewrite(text string, r *results, ids []string) (string, error) {
	var b strings.Builder
	seen := map[string]bool{}
	rest := text
	for {
		loc := marker.FindStringSubmatchIndex(rest)
		if loc == nil {
			b.WriteString(rest)
			break
		}
		kind, id := rest[loc[2]:loc[3]], rest[loc[4]:loc[5]]
		if kind != "begin" {
			return "", fmt.Errorf("%q without its begin", rest[loc[0]:loc[1]])
		}
		end := "<!-- bench-figures:end " + id + " -->"
		i := strings.Index(rest[loc[1]:], end)
		if i < 0 {
			return "", fmt.Errorf("no %q", end)
		}
		body, err := r.block(id)
		if err != nil {
			return "", err
		}
		if seen[id] {
			return "", fmt.Errorf("the block %q twice", id)
		}
		seen[id] = true
		b.WriteString(rest[:loc[1]])
		b.WriteString("\n" + body + "\n")
		b.WriteString(end)
		rest = rest[loc[1]+i+len(end):]
	}
	var missing []string
	for _, id := range ids {
		if !seen[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("no generated block for %s (<!-- bench-figures:begin ID --> <!-- bench-figures:end ID -->)",
			strings.Join(missing, ", "))
	}
	return b.String(), nil
}

// checkTopics refuses a row whose figure the bench does not write, and a target the bench
// writes that no row shows.
func checkTopics(figs []benchFigure) error {
	var errs []error
	var rows []string
	for _, t := range topics {
		for _, row := range t.Rows {
			rows = append(rows, row.Figure)
			if !anyMatch(figs, row.Figure, false) {
				errs = append(errs, fmt.Errorf("topic %s names %s, which the bench's source does not write", t.ID, row.Figure))
			}
		}
	}
	// Each addTarget call is shown when a row matches one of the names it may write.
	covered := map[string]bool{}
	for _, f := range figs {
		if !f.Target {
			continue
		}
		if _, ok := covered[f.Pos]; !ok {
			covered[f.Pos] = false
		}
		for _, row := range rows {
			if overlap(f.Pattern, row) {
				covered[f.Pos] = true
			}
		}
	}
	for _, f := range figs {
		if f.Target && !covered[f.Pos] {
			errs = append(errs, fmt.Errorf("the bench's target %s (%s) is in no topic of hack/benchdocs/topics.go", f.Pattern, f.Pos))
			covered[f.Pos] = true // once a call
		}
	}
	return errors.Join(errs...)
}

func anyMatch(figs []benchFigure, name string, targets bool) bool {
	for _, f := range figs {
		if (!targets || f.Target) && overlap(f.Pattern, name) {
			return true
		}
	}
	return false
}

// overlap reports whether two names with "*" wildcards may name the same figure (either read
// as a pattern matches the other with its wildcards filled in).
func overlap(a, b string) bool {
	if ok, _ := path.Match(a, strings.ReplaceAll(b, "*", "x")); ok {
		return true
	}
	ok, _ := path.Match(b, strings.ReplaceAll(a, "*", "x"))
	return ok
}

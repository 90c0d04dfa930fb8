package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/meters/synth"
)

// asMain makes the test binary run flexsite-admin's main, so that a test sees the command as
// a platform team does: its exit status, stdout and stderr.
const asMain = "FLEXSITE_ADMIN_TEST_AS_MAIN"

func init() {
	if os.Getenv(asMain) == "1" {
		main()
		os.Exit(0)
	}
}

// admin runs flexsite-admin with args, stdin and $FLEXSITE_DATABASE_URL the test database's.
func admin(t *testing.T, stdin []byte, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMain+"=1", "FLEXSITE_DATABASE_URL="+testDB.URL)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		status = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), status
}

func generated(t *testing.T, seed uint64, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := synth.WriteCSV(&b, seed, n, []string{"SW1A 1AA"}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func registerRows(t *testing.T) int64 {
	t.Helper()
	var n int64
	if err := testDB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM meter_points`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// `meters import FILE` loads the file and says how many rows are new and how many replaced;
// the same file again replaces them all (idempotent); a gzip file on stdin is read the same.
func TestMetersImport(t *testing.T) {
	file := writeFile(t, "register.csv", generated(t, 41, 2000))
	before := registerRows(t)
	stdout, stderr, status := admin(t, nil, "meters", "import", file)
	if status != 0 || !strings.HasPrefix(stdout, "imported 2,000 meter points (2,000 new, 0 replaced) in ") {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 0 and the rows imported", status, stdout, stderr)
	}
	if after := registerRows(t); after != before+2000 {
		t.Errorf("%d rows in the register, want %d", after, before+2000)
	}
	stdout, _, status = admin(t, nil, "meters", "import", file)
	if status != 0 || !strings.HasPrefix(stdout, "imported 2,000 meter points (0 new, 2,000 replaced) in ") {
		t.Errorf("again: exit %d, stdout %q; want every row replaced", status, stdout)
	}

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(generated(t, 42, 1))
	_ = zw.Close()
	stdout, stderr, status = admin(t, gz.Bytes(), "meters", "import", "-")
	if status != 0 || !strings.HasPrefix(stdout, "imported 1 meter point (1 new, 0 replaced) in ") {
		t.Errorf("gzip on stdin: exit %d, stdout %q, stderr %q", status, stdout, stderr)
	}
}

// A file with rejected rows: each is listed with its line and reason, the command says
// nothing was imported and exits non-zero, and the register is as it was. Past the first 100
// the rest are counted.
func TestMetersImportRejected(t *testing.T) {
	file := generated(t, 43, 300)
	file = withLine(file, 10, func(f []string) []string { f[0] = f[0][:12] + string('0'+(f[0][12]-'0'+1)%10); return f })
	file = withLine(file, 20, func(f []string) []string { f[6] = ""; return f })
	before := registerRows(t)
	stdout, stderr, status := admin(t, nil, "meters", "import", writeFile(t, "bad.csv", file))
	if status != 2 || stdout != "" || strings.Contains(stderr, "merging") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing on stdout, no merge", status, stdout, stderr)
	}
	for _, want := range []string{"line 10: mpan: ", "check digit", "line 20: postcode: no postcode",
		"bad.csv: 2 rows rejected; nothing was imported"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q; want it to say %q", stderr, want)
		}
	}
	if after := registerRows(t); after != before {
		t.Errorf("%d rows in the register after a refused import, want %d", after, before)
	}

	many := generated(t, 44, 150)
	for line := 2; line <= 151; line++ {
		many = withLine(many, line, func(f []string) []string { f[9] = "perhaps"; return f })
	}
	_, stderr, status = admin(t, nil, "meters", "import", writeFile(t, "many.csv", many))
	if status != 2 || strings.Count(stderr, "half_hourly_settled") != 100 || !strings.Contains(stderr, "... and 50 more\n") ||
		!strings.Contains(stderr, "150 rows rejected; nothing was imported") {
		t.Errorf("exit %d, stderr %q; want 100 rows listed, 50 more counted", status, stderr)
	}
}

// A quote never closed (line 4) before 20 MB of rows: the command stops at that row, names its
// line and says nothing was imported, and the register is as it was.
func TestMetersImportUnclosedQuote(t *testing.T) {
	file := withLine(generated(t, 46, 5), 4, func(f []string) []string { f[1] = `"Flat 2`; return f })
	row := bytes.SplitAfter(generated(t, 47, 1), []byte("\n"))[1]
	file = append(file, bytes.Repeat(row, (20<<20)/len(row))...)
	before := registerRows(t)
	stdout, stderr, status := admin(t, nil, "meters", "import", writeFile(t, "open-quote.csv", file))
	if status == 0 || stdout != "" || !strings.Contains(stderr,
		"open-quote.csv: line 4: a row longer than 65536 bytes, over several lines: a quoted field is not closed") ||
		!strings.Contains(stderr, "nothing was imported") {
		t.Errorf("exit %d, stdout %q, stderr %q; want the row of line 4 named, nothing imported", status, stdout, stderr)
	}
	if after := registerRows(t); after != before {
		t.Errorf("%d rows in the register after a refused import, want %d", after, before)
	}
}

// Not on a terminal (a Job's log, a pipe), progress is plain lines: no bar, no escape codes.
func TestMetersImportPlainProgress(t *testing.T) {
	file := writeFile(t, "big.csv", generated(t, 45, 250_000))
	stdout, stderr, status := admin(t, nil, "meters", "import", file)
	if status != 0 || !strings.HasPrefix(stdout, "imported 250,000 meter points (250,000 new, 0 replaced)") {
		t.Fatalf("exit %d, stdout %q, stderr %q", status, stdout, stderr)
	}
	lines := regexp.MustCompile(`(?m)^meters import: [0-9,]+ rows \([0-9]+%\)$`).FindAllString(stderr, -1)
	if len(lines) < 2 || !strings.Contains(stderr, "meters import: 250,000 rows read; merging into the register\n") ||
		strings.ContainsAny(stderr, "\r\x1b") {
		t.Errorf("stderr %q; want plain progress lines (one per 100,000 rows), then the merge", stderr)
	}
}

// A database that does not answer: the command says so and exits 2, never printing the URL's
// password.
func TestMetersImportDatabaseDown(t *testing.T) {
	file := writeFile(t, "register.csv", generated(t, 46, 10))
	_, stderr, status := admin(t, nil, "meters", "import", "--database-url",
		"postgres://flexsite:s3cret-pw@127.0.0.1:1/flexsite?connect_timeout=2", file)
	if status != 2 || !strings.Contains(stderr, "reaching the database: the database is unavailable") ||
		strings.Contains(stderr, "s3cret-pw") {
		t.Errorf("exit %d, stderr %q; want 2, the database unavailable, no password", status, stderr)
	}
}

// A database the manager never migrated: the command says to start the manager first (it
// does not move the schema itself) and exits 2.
func TestMetersImportWithoutTheSchema(t *testing.T) {
	ctx := context.Background()
	name := fmt.Sprintf("flexsite_admin_unmigrated_%d", rand.Uint32())
	if _, err := testDB.Pool.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = testDB.Pool.Exec(ctx, "DROP DATABASE "+name) }()
	u, err := url.Parse(testDB.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	_, stderr, status := admin(t, nil, "meters", "import", "--database-url", u.String(),
		writeFile(t, "register.csv", generated(t, 47, 10)))
	if status != 2 || !strings.Contains(stderr, "no meter register (table meter_points): start the Flexsite manager") {
		t.Errorf("exit %d, stderr %q; want 2 and to start the manager first", status, stderr)
	}
}

func TestMetersUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"meters"}, "usage: flexsite-admin meters import"},
		{[]string{"meters", "import"}, "usage: flexsite-admin meters import"},
		{[]string{"meters", "import", "/nonexistent/register.csv"}, "no such file"},
		{[]string{"meters", "generate"}, "--count must be a positive number"},
		{[]string{"meters", "generate", "--count", "3", "--postcode", "NOT A POSTCODE"}, `"NOT A POSTCODE" is not a UK postcode`},
	} {
		if _, stderr, status := admin(t, nil, c.args...); status != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, status, stderr, c.want)
		}
	}
}

// `meters generate` writes the same register for the same seed, with the first meter points
// at the postcodes asked for, and it imports.
func TestMetersGenerate(t *testing.T) {
	one, _, status := admin(t, nil, "meters", "generate", "--count", "500", "--seed", "9", "--postcode", "m1 1ae")
	two, _, _ := admin(t, nil, "meters", "generate", "--count", "500", "--seed", "9", "--postcode", "m1 1ae")
	if status != 0 || one != two || strings.Count(one, "\n") != 501 {
		t.Fatalf("exit %d; want the same 501 lines twice", status)
	}
	if first := strings.Split(one, "\n")[1]; !strings.Contains(first, ",M1 1AE,") {
		t.Errorf("first row %q; want it at M1 1AE", first)
	}
	if stdout, stderr, status := admin(t, []byte(one), "meters", "import", "-"); status != 0 ||
		!strings.HasPrefix(stdout, "imported 500 meter points") {
		t.Errorf("importing it: exit %d, %q %q", status, stdout, stderr)
	}
}

// withLine is file with its line n (1-based: the header is line 1) changed by edit.
func withLine(file []byte, n int, edit func(fields []string) []string) []byte {
	lines := strings.Split(string(file), "\n")
	lines[n-1] = strings.Join(edit(strings.Split(lines[n-1], ",")), ",")
	return []byte(strings.Join(lines, "\n"))
}

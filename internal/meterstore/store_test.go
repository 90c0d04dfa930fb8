package meterstore_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/meters/synth"
	"github.com/flexsite/flexsite/internal/meterstore"
)

var testDB *dbtest.Database

func TestMain(m *testing.M) {
	dbtest.Main(m, &testDB)
}

// registerFile is a generated register of n meter points, the first at SW1A 1AA.
func registerFile(t *testing.T, seed uint64, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := synth.WriteCSV(&buf, seed, n, []string{"SW1A 1AA"}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestImportThenFind(t *testing.T) {
	ctx := context.Background()
	s := &meterstore.Store{Pool: testDB.Pool}
	file := registerFile(t, 7, 2000)
	report, err := s.Import(ctx, bytes.NewReader(file), nil)
	if err != nil {
		t.Fatal(err)
	}
	if report.Rows != 2000 {
		t.Fatalf("report %+v, want 2000 rows", report)
	}
	again, err := s.Import(ctx, bytes.NewReader(file), nil)
	if err != nil || again.Replaced != 2000 || again.Inserted != 0 {
		t.Fatalf("importing again: %+v, %v; want every row replaced", again, err)
	}
	points, err := s.AtPostcode(ctx, "SW1A 1AA", meters.MaxSearchResults)
	if err != nil || len(points) == 0 {
		t.Fatalf("AtPostcode: %d points, %v", len(points), err)
	}
	for i := 1; i < len(points); i++ {
		if meters.SortKey(points[i-1].Address()) > meters.SortKey(points[i].Address()) {
			t.Fatalf("not in natural order: %q before %q", points[i-1].Address(), points[i].Address())
		}
	}
	got, ok, err := s.ByMPAN(ctx, points[0].MPAN)
	if err != nil || !ok || got != points[0] {
		t.Fatalf("ByMPAN = %+v, %v, %v; want %+v", got, ok, err, points[0])
	}
	ranked, err := s.Ranked(ctx, "SW1A 1AA", points[2].Address(), 5)
	if err != nil || len(ranked) == 0 || ranked[0].Point != points[2] || ranked[0].Similarity != 1 {
		t.Fatalf("Ranked: %+v, %v", ranked, err)
	}
}

func TestImportWithABadRowChangesNothing(t *testing.T) {
	ctx := context.Background()
	s := &meterstore.Store{Pool: testDB.Pool}
	file := string(registerFile(t, 8, 50))
	lines := strings.Split(file, "\n")
	bad := []byte(lines[10]) // line 11 of the file
	bad[12] = '0' + (bad[12]-'0'+1)%10
	lines[10] = string(bad)
	_, err := s.Import(ctx, strings.NewReader(strings.Join(lines, "\n")), nil)
	var rejected *meterstore.RejectedError
	if !errors.As(err, &rejected) || rejected.Count != 1 || rejected.Rejections[0].Line != 11 {
		t.Fatalf("err = %v; want line 11 rejected", err)
	}
	mpan := strings.SplitN(lines[11], ",", 2)[0]
	if _, ok, err := s.ByMPAN(ctx, mpan); err != nil || ok {
		t.Fatalf("a row of a refused import was loaded (%v)", err)
	}
}

package db_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
)

// The reports kept before the bound was counted on the dispatch's row (migration 00033) are
// counted into it: per client, per dispatch however the reports spelt its eventID, and none
// for a report that names no dispatch. Down again, the previous version's function counts
// the rows as it did.
func TestReportCountsFromTheReportsKept(t *testing.T) {
	ctx := context.Background()
	fresh, err := dbtest.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close(ctx)
	if _, err := fresh.Pool.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	sqlDB := stdlib.OpenDBFromPool(fresh.Pool)
	defer func() { _ = sqlDB.Close() }()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, db.Migrations())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.UpTo(ctx, 32); err != nil {
		t.Fatal(err)
	}
	const event, other = "4f0c2f8e-7d0b-4c5e-9a51-3b8d6e2a1c07", "9b2e6c1d-3f4a-4e8b-a7c5-0d1f2e3a4b5c"
	if _, err := fresh.Pool.Exec(ctx, `INSERT INTO dispatches (organisation, event_id, flex_event, site_id, asset_id,
		market_id, level_kw, from_time, to_time, event_timestamp)
		SELECT 'org', e, 'fe-' || e, 'site', 'asset-' || e, 'limited_pause', 1, now(), now() + interval '1 hour', now()
		FROM unnest($1::uuid[]) AS e`, []string{event, other}); err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]string{{"ven", event}, {"ven", upper(event)}, {"ven", "urn:uuid:" + event},
		{"ven", "{" + event + "}"}, {"logic", event}, {"ven", "not-a-dispatch"}, {"ven", other}} {
		if _, err := fresh.Pool.Exec(ctx, `INSERT INTO openadr_reports (organisation, id, client_name, program_id, event_id,
			report_client_name, body) VALUES ('org', gen_random_uuid(), $1, 'limited_pause', $2, 'v', '{}')`,
			r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := provider.UpTo(ctx, 33); err != nil {
		t.Fatal(err)
	}
	counts := func() map[string]string {
		out := map[string]string{}
		rows, err := fresh.Pool.Query(ctx, `SELECT event_id::text, COALESCE(report_counts::text, '') FROM dispatches
			WHERE organisation = 'org'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var e, c string
			if err := rows.Scan(&e, &c); err != nil {
				t.Fatal(err)
			}
			out[e] = c
		}
		return out
	}
	if got, want := counts(), map[string]string{event: `{"ven": 4, "logic": 1}`, other: `{"ven": 1}`}; got[event] != want[event] ||
		got[other] != want[other] {
		t.Errorf("counts %v, want %v", got, want)
	}
	if _, err := provider.DownTo(ctx, 32); err != nil {
		t.Fatal(err)
	}
	var room bool
	if err := fresh.Pool.QueryRow(ctx, `SELECT openadr_report_room('org', 'ven', $1, 1)`, event).Scan(&room); err != nil || room {
		t.Errorf("the previous function, down again: room %v (%v), want none", room, err)
	}
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'f' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

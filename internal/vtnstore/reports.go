package vtnstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Report is a report as stored (migration 00029): who sent it (ClientName, the API client),
// what it names, and its body as the door answers it back.
type Report struct {
	ID         uuid.UUID
	ClientName string
	ProgramID  string
	EventID    string
	// ReportClientName is the report's own clientName; Name its reportName (empty: none).
	ReportClientName string
	Name             string
	Body             json.RawMessage
	Created          time.Time
	Modified         time.Time
}

// ReportQuery is a report search: the organisation, the sending client whose reports alone
// are answered (empty: every client's), the report's program, event and clientName (empty:
// any), and the page.
type ReportQuery struct {
	Organisation, Sender              string
	ProgramID, EventID, ReportsClient string
	Skip, Limit                       int
}

const reportColumns = `id, client_name, program_id, event_id, report_client_name, COALESCE(report_name, ''), body,
	created_at, modified_at`

func scanReport(row pgx.Row) (Report, error) {
	var r Report
	err := row.Scan(&r.ID, &r.ClientName, &r.ProgramID, &r.EventID, &r.ReportClientName, &r.Name, &r.Body,
		&r.Created, &r.Modified)
	return r, err
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// CountReports is how many reports the client sender keeps of the event, up to limit: the
// count its dispatch's row keeps (migration 00033); none for an event no dispatch is.
func (s *Store) CountReports(ctx context.Context, organisation, sender, eventID string, limit int) (int, error) {
	event, err := uuid.Parse(eventID)
	if err != nil {
		return 0, nil
	}
	var n int
	err = s.Pool.QueryRow(ctx, `SELECT COALESCE((report_counts ->> $3::text)::integer, 0) FROM dispatches
		WHERE organisation = $1 AND event_id = $2`, organisation, event, sender).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return min(n, limit), s.classify(err)
}

// Querier runs one statement in a report's transaction (CreateReport's also).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CreateReport stores a report, refusing ErrFull when its client keeps maxPerEvent reports of
// the event already (reportRoom, checked and counted on the event's dispatch row under its
// lock; ErrFull too when no dispatch is the event), then runs also (nil: none) in the same
// transaction: what also writes commits with the report, and an error of also's leaves
// neither. Without also, the counted insert is one statement in one implicit transaction; with
// it, also's statements follow it in an explicit one.
func (s *Store) CreateReport(ctx context.Context, organisation string, r Report, maxPerEvent int, also func(Querier) error) error {
	event, err := uuid.Parse(r.EventID)
	if err != nil {
		return ErrFull
	}
	sql := `WITH c AS (UPDATE dispatches d SET ` + reportCount("$3") + `
			WHERE d.organisation = $1 AND d.event_id = $11 AND ` + reportRoom("$3", "$10") + ` RETURNING 1)
		INSERT INTO openadr_reports (organisation, id, client_name, program_id, event_id,
		report_client_name, report_name, body, created_at, modified_at, counted)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $9, true FROM c RETURNING 1`
	args := []any{organisation, r.ID, r.ClientName, r.ProgramID, r.EventID, r.ReportClientName, nullable(r.Name),
		r.Body, r.Created.UTC(), maxPerEvent, event}
	if also == nil {
		var inserted int64
		err := s.Pool.QueryRow(ctx, sql, args...).Scan(&inserted)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrFull
		}
		return s.refusal(err)
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		var inserted int64
		err := tx.QueryRow(ctx, sql, args...).Scan(&inserted)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return ErrFull
		case err != nil:
			return err
		}
		return also(tx)
	})
}

// reportRoom is the bound of the reports a client keeps of an event as one SQL condition over
// the event's dispatch row (d), the client's and the bound's expressions: the client keeps
// fewer than the bound (the row's report_counts, migration 00033).
func reportRoom(client, limit string) string {
	return `COALESCE((d.report_counts ->> ` + client + `::text)::integer, 0) < ` + limit + `::integer`
}

// reportCount is the assignment of the event's dispatch row (d) that counts one more report of
// the client's.
func reportCount(client string) string {
	return `report_counts = COALESCE(d.report_counts, '{}') || jsonb_build_object(` + client + `::text,
		COALESCE((d.report_counts ->> ` + client + `::text)::integer, 0) + 1)`
}

// ReportJoin's fragments of the statement that joins a report's counted insert to its status
// (dispatchstore.Joined, their parameters $13 onwards, ReportJoin's args): the gate holds
// when the client holds the dispatch's asset (HolderColumn over the dispatch's row, d), or
// always when not held; the room while the client keeps fewer than maxPerEvent reports of the
// event (reportRoom); the count counts the report on the dispatch's row; the write inserts the
// report, counted, for each row of the CTE "takes".
func ReportJoinSQL(held bool) (gate, room, count, write string) {
	gate = `true`
	if held {
		gate = HolderColumn("d.organisation", "d.asset_id") + ` IS NOT DISTINCT FROM $15`
	}
	return gate, reportRoom("$15", "$22"), reportCount("$15"), joinWrite
}

// ReportJoin is the parameters of a report's counted insert joined to its status
// (ReportJoinSQL), $13 onwards.
func ReportJoin(organisation string, r Report, maxPerEvent int) []any {
	// The id as pgx's own UUID: encoded as it is, not through its text (uuid.UUID's Value).
	return []any{organisation, pgtype.UUID{Bytes: r.ID, Valid: true}, r.ClientName, r.ProgramID, r.EventID,
		r.ReportClientName, nullable(r.Name), r.Body, r.Created.UTC(), maxPerEvent}
}

const joinWrite = `INSERT INTO openadr_reports (organisation, id, client_name, program_id, event_id, report_client_name,
		report_name, body, created_at, modified_at, counted)
		SELECT $13, $14, $15, $16, $17, $18, $19, $20, $21, $21, true FROM takes`

// Report is the organisation's report id, or ErrNotFound.
func (s *Store) Report(ctx context.Context, organisation string, id uuid.UUID) (Report, error) {
	r, err := scanReport(s.Pool.QueryRow(ctx, `SELECT `+reportColumns+` FROM openadr_reports
		WHERE organisation = $1 AND id = $2`, organisation, id))
	return r, s.refusal(err)
}

// Reports answers a page of the organisation's reports that q names, oldest first.
func (s *Store) Reports(ctx context.Context, q ReportQuery) ([]Report, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+reportColumns+` FROM openadr_reports WHERE organisation = $1
		AND ($2 = '' OR client_name = $2) AND ($3 = '' OR program_id = $3) AND ($4 = '' OR event_id = $4)
		AND ($5 = '' OR report_client_name = $5)
		ORDER BY created_at, id OFFSET $6 LIMIT $7`,
		q.Organisation, q.Sender, q.ProgramID, q.EventID, q.ReportsClient, q.Skip, q.Limit)
	if err != nil {
		return nil, s.classify(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Report, error) { return scanReport(r) })
	return out, s.classify(err)
}

// UpdateReport replaces the report's program, event, clientName, name and body (its id,
// sender and creation stay): ErrNotFound; ErrFull when it moves to another event whose
// dispatch its client keeps maxPerEvent reports of (checked under that dispatch row's lock; the
// move itself is counted by migration 00033's trigger).
func (s *Store) UpdateReport(ctx context.Context, organisation string, r Report, maxPerEvent int) (Report, error) {
	event, err := uuid.Parse(r.EventID)
	if err != nil {
		return Report{}, ErrNotFound
	}
	out, err := scanReport(s.Pool.QueryRow(ctx, `WITH t AS MATERIALIZED (
			SELECT `+reportRoom("x.client_name", "$10")+` AS room FROM openadr_reports x, dispatches d
			WHERE x.organisation = $1 AND x.id = $2 AND d.organisation = $1 AND d.event_id = $9 FOR UPDATE OF d)
		UPDATE openadr_reports SET program_id = $3, event_id = $4,
		report_client_name = $5, report_name = $6, body = $7, modified_at = $8
		WHERE organisation = $1 AND id = $2 AND (openadr_event_uuid(event_id) = $9 OR (SELECT room FROM t))
		RETURNING `+reportColumns,
		organisation, r.ID, r.ProgramID, r.EventID, r.ReportClientName, nullable(r.Name), r.Body, r.Modified.UTC(), event,
		maxPerEvent))
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := s.Report(ctx, organisation, r.ID); err != nil {
			return Report{}, err
		}
		return Report{}, ErrFull
	}
	return out, s.refusal(err)
}

// DeleteReport deletes the stored report, answering it as it was.
func (s *Store) DeleteReport(ctx context.Context, organisation string, id uuid.UUID) (Report, error) {
	r, err := scanReport(s.Pool.QueryRow(ctx, `DELETE FROM openadr_reports WHERE organisation = $1 AND id = $2
		RETURNING `+reportColumns, organisation, id))
	return r, s.refusal(err)
}

package vtnstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/flexsite/flexsite/internal/db"
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

// CountReports counts the reports the client sender keeps of the event, up to limit.
func (s *Store) CountReports(ctx context.Context, organisation, sender, eventID string, limit int) (int, error) {
	var n int
	err := s.Pool.QueryRow(ctx, countReports, organisation, eventID, sender, limit).Scan(&n)
	return n, s.classify(err)
}

const countReports = `SELECT LEAST(COALESCE((SELECT reports FROM openadr_report_counts
	WHERE organisation = $1 AND event_id = $2 AND client_name = $3), 0), $4)`

// Querier runs one statement in a report's transaction (CreateReport's also).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CreateReport stores a report, refusing ErrFull when its client has sent maxPerEvent reports
// of the event already (the count counted adds one to), then runs also (nil: none) in the
// same transaction: what also writes commits with the report, and an error of also's leaves
// neither. Without also, the counted insert is one statement in one implicit transaction;
// with it, also's statements follow it in an explicit one.
func (s *Store) CreateReport(ctx context.Context, organisation string, r Report, maxPerEvent int, also func(Querier) error) error {
	sql := `WITH room AS (` + counted("$1", "$3", "$5", "$10", "(VALUES (1)) one") + `)
		INSERT INTO openadr_reports (organisation, id, client_name, program_id, event_id,
		report_client_name, report_name, body, created_at, modified_at)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $9 FROM room RETURNING 1`
	args := []any{organisation, r.ID, r.ClientName, r.ProgramID, r.EventID, r.ReportClientName, nullable(r.Name),
		r.Body, r.Created.UTC(), maxPerEvent}
	if also == nil {
		var inserted int64
		err := s.Pool.QueryRow(ctx, sql, args...).Scan(&inserted)
		return s.refusal(err)
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		var inserted int64
		if err := tx.QueryRow(ctx, sql, args...).Scan(&inserted); err != nil {
			return err
		}
		return also(tx)
	})
}

// counted is the count of the reports a client keeps of an event (migration 00032) with one
// added for each row of from, as one data-modifying statement over the organisation's, the
// client's, the event's and the bound's expressions, answering a row for each report added.
// Past the bound, the count's check (openadr_report_counts_bound) aborts the statement it is
// part of, which then writes nothing (Full tells that error). Its insert or update takes the
// count's row lock, so reports racing into the last places are counted one after the other.
func counted(organisation, client, event, bound, from string) string {
	return `INSERT INTO openadr_report_counts AS c (organisation, event_id, client_name, reports, bound)
		SELECT ` + organisation + `, ` + event + `, ` + client + `, 1, ` + bound + ` FROM ` + from + `
		ON CONFLICT (organisation, event_id, client_name) DO UPDATE SET reports = c.reports + 1, bound = EXCLUDED.bound
		RETURNING 1`
}

// Full tells whether err refused a report for the bound: ErrFull, or the count's check
// (counted) in a statement another store ran with a report's writes joined (ReportJoin).
func Full(err error) bool {
	var ce *db.ConstraintError
	return errors.Is(err, ErrFull) ||
		errors.As(err, &ce) && ce.Kind == "check" && ce.Constraint == "openadr_report_counts_bound"
}

// ReportJoin is a report's counted insert as a gate and writes another store's statement
// joins (dispatchstore.Joined): gate holds (when held) while the client holds the dispatch's
// asset (HolderColumn over the dispatch's row, d); writes, for each row of the CTE "takes",
// add one to the client's count of the event's reports (counted: past maxPerEvent, the count's
// check aborts the whole statement, which Full tells) and insert the report. Their parameters
// are $13 onwards, args.
func ReportJoin(organisation string, r Report, maxPerEvent int, held bool) (gate string, writes []string, args []any) {
	gate = `true`
	if held {
		gate = HolderColumn("d.organisation", "d.asset_id") + ` IS NOT DISTINCT FROM $15`
	}
	writes = []string{counted("$13", "$15", "$17", "$22", "takes"),
		`INSERT INTO openadr_reports (organisation, id, client_name, program_id, event_id, report_client_name,
		report_name, body, created_at, modified_at)
		SELECT $13, $14, $15, $16, $17, $18, $19, $20, $21, $21 FROM takes`}
	// The id as pgx's own UUID: encoded as it is, not through its text (uuid.UUID's Value).
	args = []any{organisation, pgtype.UUID{Bytes: r.ID, Valid: true}, r.ClientName, r.ProgramID, r.EventID,
		r.ReportClientName, nullable(r.Name), r.Body, r.Created.UTC(), maxPerEvent}
	return gate, writes, args
}

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
// sender and creation stay): ErrNotFound. A report moved to another event is counted there
// (the bound is not applied to a move) and no longer where it was, in the same transaction,
// which holds the report's row from the start.
func (s *Store) UpdateReport(ctx context.Context, organisation string, r Report) (Report, error) {
	var out Report
	err := s.tx(ctx, func(tx pgx.Tx) error {
		var client, was string
		if err := tx.QueryRow(ctx, `SELECT client_name, event_id FROM openadr_reports WHERE organisation = $1 AND id = $2
			FOR UPDATE`, organisation, r.ID).Scan(&client, &was); err != nil {
			return err
		}
		var err error
		out, err = scanReport(tx.QueryRow(ctx, `WITH r AS (UPDATE openadr_reports SET program_id = $3, event_id = $4,
			report_client_name = $5, report_name = $6, body = $7, modified_at = $8
			WHERE organisation = $1 AND id = $2 RETURNING `+reportColumns+`),
		gone AS (UPDATE openadr_report_counts c SET reports = c.reports - 1
			WHERE c.organisation = $1 AND c.event_id = $10 AND c.client_name = $9 AND $10 <> $4),
		came AS (INSERT INTO openadr_report_counts AS c (organisation, event_id, client_name, reports, bound)
			SELECT $1, $4, $9, 1, 1 WHERE $10 <> $4
			ON CONFLICT (organisation, event_id, client_name)
			DO UPDATE SET reports = c.reports + 1, bound = GREATEST(c.bound, c.reports + 1))
		SELECT * FROM r`,
			organisation, r.ID, r.ProgramID, r.EventID, r.ReportClientName, nullable(r.Name), r.Body, r.Modified.UTC(),
			client, was))
		return err
	})
	return out, err
}

// DeleteReport deletes the stored report, answering it as it was; it is counted no longer.
func (s *Store) DeleteReport(ctx context.Context, organisation string, id uuid.UUID) (Report, error) {
	r, err := scanReport(s.Pool.QueryRow(ctx, `WITH r AS (DELETE FROM openadr_reports WHERE organisation = $1 AND id = $2
		RETURNING `+reportColumns+`),
	gone AS (UPDATE openadr_report_counts c SET reports = c.reports - 1 FROM r
		WHERE c.organisation = $1 AND c.event_id = r.event_id AND c.client_name = r.client_name)
	SELECT * FROM r`, organisation, id))
	return r, s.refusal(err)
}

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

// CountReports counts the reports the client sender keeps of the event, up to limit.
func (s *Store) CountReports(ctx context.Context, organisation, sender, eventID string, limit int) (int, error) {
	var n int
	err := s.Pool.QueryRow(ctx, countReports, organisation, eventID, sender, limit).Scan(&n)
	return n, s.classify(err)
}

const countReports = `SELECT count(*) FROM (SELECT 1 FROM openadr_reports
	WHERE organisation = $1 AND event_id = $2 AND client_name = $3 LIMIT $4) r`

// Querier runs one statement in a report's transaction (CreateReport's also).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CreateReport stores a report, refusing ErrFull when its client has sent maxPerEvent reports
// of the event already (counted under a lock per client and event: reportRoom), then runs also
// (nil: none) in the same transaction: what also writes commits with the report, and an error
// of also's leaves neither. Without also, the counted insert is one statement in one implicit
// transaction; with it, also's statements follow it in an explicit one.
func (s *Store) CreateReport(ctx context.Context, organisation string, r Report, maxPerEvent int, also func(Querier) error) error {
	sql := `INSERT INTO openadr_reports (organisation, id, client_name, program_id, event_id,
		report_client_name, report_name, body, created_at, modified_at)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $9 WHERE ` + reportRoom("$1", "$3", "$5", "$10") + ` RETURNING 1`
	args := []any{organisation, r.ID, r.ClientName, r.ProgramID, r.EventID, r.ReportClientName, nullable(r.Name),
		r.Body, r.Created.UTC(), maxPerEvent}
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
// the organisation's, the client's, the event's and the bound's expressions: the client keeps
// fewer than the bound. It takes the lock of those reports first (openadr_report_room,
// migration 00031), so that a statement that counts them and inserts one is race-free on its
// own.
func reportRoom(organisation, client, event, limit string) string {
	return `openadr_report_room(` + organisation + `, ` + client + `, ` + event + `, ` + limit + `)`
}

// ReportJoin is a report's counted insert as a gate and a write another store's statement
// joins (dispatchstore.Joined): gate holds while the client keeps fewer than maxPerEvent
// reports of the event (reportRoom: the bound's lock is taken in it) and, when held, while the
// client holds the dispatch's asset (HolderColumn over the dispatch's row, d); write inserts
// the report for each row of the CTE "takes". Their parameters are $13 onwards, args.
func ReportJoin(organisation string, r Report, maxPerEvent int, held bool) (gate, write string, args []any) {
	gate = joinGate
	if held {
		gate = joinHeldGate
	}
	// The id as pgx's own UUID: encoded as it is, not through its text (uuid.UUID's Value).
	args = []any{organisation, pgtype.UUID{Bytes: r.ID, Valid: true}, r.ClientName, r.ProgramID, r.EventID,
		r.ReportClientName, nullable(r.Name), r.Body, r.Created.UTC(), maxPerEvent}
	return gate, joinWrite, args
}

// ReportJoin's gates and write, made once.
var (
	joinGate     = reportRoom("$13", "$15", "$17", "$22")
	joinHeldGate = HolderColumn("d.organisation", "d.asset_id") + ` IS NOT DISTINCT FROM $15 AND ` + joinGate
)

const joinWrite = `INSERT INTO openadr_reports (organisation, id, client_name, program_id, event_id, report_client_name,
		report_name, body, created_at, modified_at)
		SELECT $13, $14, $15, $16, $17, $18, $19, $20, $21, $21 FROM takes`

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
// sender and creation stay): ErrNotFound.
func (s *Store) UpdateReport(ctx context.Context, organisation string, r Report) (Report, error) {
	out, err := scanReport(s.Pool.QueryRow(ctx, `UPDATE openadr_reports SET program_id = $3, event_id = $4,
		report_client_name = $5, report_name = $6, body = $7, modified_at = $8
		WHERE organisation = $1 AND id = $2 RETURNING `+reportColumns,
		organisation, r.ID, r.ProgramID, r.EventID, r.ReportClientName, nullable(r.Name), r.Body, r.Modified.UTC()))
	return out, s.refusal(err)
}

// DeleteReport deletes the stored report, answering it as it was.
func (s *Store) DeleteReport(ctx context.Context, organisation string, id uuid.UUID) (Report, error) {
	r, err := scanReport(s.Pool.QueryRow(ctx, `DELETE FROM openadr_reports WHERE organisation = $1 AND id = $2
		RETURNING `+reportColumns, organisation, id))
	return r, s.refusal(err)
}

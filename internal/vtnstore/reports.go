package vtnstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
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
// of the event already (counted under a lock per client and event), then runs also (nil: none)
// in the same transaction: what also writes commits with the report, and an error of also's
// leaves neither. Without also, the lock and the counted insert are one round trip in one
// implicit transaction; with it, also's statements follow them in an explicit one.
func (s *Store) CreateReport(ctx context.Context, organisation string, r Report, maxPerEvent int, also func(Querier) error) error {
	if also == nil {
		var inserted int64
		err := s.ReportLocked(organisation, r).QueryRow(ctx, `INSERT INTO openadr_reports (organisation, id,
			client_name, program_id, event_id, report_client_name, report_name, body, created_at, modified_at)
			SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $9 WHERE `+reportRoom("$1", "$3", "$5", "$10")+`
			RETURNING 1`, organisation, r.ID, r.ClientName, r.ProgramID, r.EventID, r.ReportClientName,
			nullable(r.Name), r.Body, r.Created.UTC(), maxPerEvent).Scan(&inserted)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrFull
		}
		return s.refusal(err)
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(lockSQL, lockName("openadr_reports", organisation, r.ClientName, r.EventID))
		b.Queue(`INSERT INTO openadr_reports (organisation, id, client_name, program_id, event_id,
			report_client_name, report_name, body, created_at, modified_at)
			SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $9 WHERE `+reportRoom("$1", "$3", "$5", "$10"),
			organisation, r.ID, r.ClientName, r.ProgramID, r.EventID, r.ReportClientName, nullable(r.Name), r.Body,
			r.Created.UTC(), maxPerEvent)
		res := tx.SendBatch(ctx, b)
		_, err := res.Exec()
		var inserted int64
		if err == nil {
			tag, ierr := res.Exec()
			inserted, err = tag.RowsAffected(), ierr
		}
		if cerr := res.Close(); err == nil {
			err = cerr
		}
		switch {
		case err != nil:
			return err
		case inserted == 0:
			return ErrFull
		}
		return also(tx)
	})
}

// reportRoom is the bound of the reports a client keeps of an event as one SQL condition over
// the organisation's, the client's, the event's and the bound's expressions: the client keeps
// fewer than the bound.
func reportRoom(organisation, client, event, limit string) string {
	return `(SELECT count(*) FROM (SELECT 1 FROM openadr_reports WHERE organisation = ` + organisation +
		` AND event_id = ` + event + ` AND client_name = ` + client + ` LIMIT ` + limit + `) r) < ` + limit
}

// ReportJoin is a report's counted insert as a gate and a write another store's statement
// joins (dispatchstore.Joined): gate holds while the client keeps fewer than maxPerEvent
// reports of the event; write inserts the report for each row of the CTE "takes". Their
// parameters are $10 onwards, args. Run the statement on ReportLocked, which takes the lock the
// count needs.
func ReportJoin(organisation string, r Report, maxPerEvent int) (gate, write string, args []any) {
	gate = reportRoom("$10", "$12", "$14", "$19")
	write = `INSERT INTO openadr_reports (organisation, id, client_name, program_id, event_id, report_client_name,
		report_name, body, created_at, modified_at)
		SELECT $10, $11, $12, $13, $14, $15, $16, $17, $18, $18 FROM takes`
	args = []any{organisation, r.ID, r.ClientName, r.ProgramID, r.EventID, r.ReportClientName, nullable(r.Name),
		r.Body, r.Created.UTC(), maxPerEvent}
	return gate, write, args
}

// ReportLocked is a Querier whose every statement runs after the lock of the reports r's
// client keeps of r's event, in one implicit transaction with it: one round trip, committed
// when the statement's row has been read (an error rolls both back). The lock makes a count
// of those reports and an insert of one in the statement race-free.
func (s *Store) ReportLocked(organisation string, r Report) Querier {
	return locked{pool: s.Pool, name: lockName("openadr_reports", organisation, r.ClientName, r.EventID)}
}

type locked struct {
	pool *pgxpool.Pool
	name string
}

func (l locked) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	b := &pgx.Batch{}
	b.Queue(lockSQL, l.name)
	b.Queue(sql, args...)
	return lockedRow{res: l.pool.SendBatch(ctx, b)}
}

type lockedRow struct{ res pgx.BatchResults }

func (r lockedRow) Scan(dest ...any) error {
	_, err := r.res.Exec()
	if err == nil {
		err = r.res.QueryRow().Scan(dest...)
	}
	if cerr := r.res.Close(); cerr != nil && (err == nil || errors.Is(err, pgx.ErrNoRows)) {
		err = cerr
	}
	return err
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

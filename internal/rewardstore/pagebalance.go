package rewardstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/ledger"
)

// PageRow is one transaction of a page as the database holds it, scanned straight into the
// compact ledger's row (ledger.Row: what Ledger.Append packs, nothing copied again), for a
// reader that encodes it without building a RewardTransaction (PageWithBalance).
type PageRow struct {
	ledger.Row
	// Occurred is when the transaction happened, the statement's order (HasOccurred false:
	// never said; such transactions come last).
	Occurred    time.Time
	HasOccurred bool
}

// scanned fills r from a history row's columns (pageRowColumns; the texts reused: sameText).
func (r *PageRow) scanned(id pgtype.UUID, typ, status string, credit, flex pgtype.Int8, start, end pgtype.Timestamptz,
	settlement pgtype.Date, occurred pgtype.Timestamptz) {
	*r = PageRow{Row: ledger.Row{ID: id.Bytes, Type: flexv1.TransactionType(typ), PaymentStatus: flexv1.PaymentStatus(status),
		CreditPence: credit.Int64, FlexWh: flex.Int64, HasFlex: flex.Valid, Start: start.Time.Unix(), HasStart: start.Valid,
		End: end.Time.Unix(), HasEnd: end.Valid}, Occurred: occurred.Time, HasOccurred: occurred.Valid}
	if settlement.Valid { // midnight UTC: the ledger's day number
		r.SettlementDay, r.HasSettlement = int32(settlement.Time.Unix()/(24*60*60)), true
	}
}

// Position is the transaction's place in the statement order, for PageAfter.
func (r *PageRow) Position() Position {
	return Position{Occurred: r.Occurred, HasOccurred: r.HasOccurred, ID: r.ID}
}

// pageWithBalance cuts Page's page from the site's history (siteHistory) and sums the balance
// over the same history (sumBalance), in one statement: one round trip, one snapshot, and the
// history (with each transaction's current status) is read once for both. The balance comes
// on every row, and alone on one row with a NULL transaction when the page is empty.
var pageWithBalance = `WITH history AS MATERIALIZED (` + siteHistory + `),
	balance AS (` + sumBalance + `),
	page AS (SELECT * FROM history
		WHERE ($4::timestamptz IS NULL OR occurred_at >= $4) AND ($5::timestamptz IS NULL OR occurred_at < $5)
		ORDER BY occurred_at DESC NULLS LAST, transaction_id LIMIT $6 OFFSET $7)
	SELECT balance.current, balance.earnings, balance.first_reward,
		page.transaction_id, page.transaction_type, page.credit_pence, page.flex_wh, page.start_at, page.end_at,
		page.settlement_date, page.status, page.occurred_at
	FROM balance LEFT JOIN page ON true
	ORDER BY page.occurred_at DESC NULLS LAST, page.transaction_id`

// PageWithBalance is Page and Balance in one statement: each transaction of the page, newest
// first, is given to row (which must not keep the *PageRow: it is reused), and the site's
// balance is answered, both from one snapshot of the database.
func (s *Store) PageWithBalance(ctx context.Context, site Site, p Page, row func(*PageRow)) (household.Balance, error) {
	b, err := s.pageWithBalance(ctx, site, p, row)
	return b, s.classify(err)
}

func (s *Store) pageWithBalance(ctx context.Context, site Site, p Page, row func(*PageRow)) (household.Balance, error) {
	var since, until *time.Time
	if !p.Since.IsZero() {
		since = &p.Since
	}
	if !p.Until.IsZero() {
		until = &p.Until
	}
	var b household.Balance
	rows, err := s.Pool.Query(ctx, pageWithBalance, site.Namespace, site.ID, undoneStatuses(), since, until, p.Limit, p.Offset)
	if err != nil {
		return b, err
	}
	defer rows.Close()
	var (
		first        pgtype.Timestamptz
		id           pgtype.UUID
		typ, status  pgtype.DriverBytes // valid until the next row: read into typText, statusText
		credit, flex pgtype.Int8
		start, end   pgtype.Timestamptz
		settlement   pgtype.Date
		occurred     pgtype.Timestamptz
		r            PageRow
		scanned      bool
		// The texts of the row before: a page's types and statuses repeat row after row.
		typText, statusText string
	)
	// The destinations once for every row: Scan's variadic slice would otherwise be made (on
	// the heap: Rows is an interface) for each row of every page read.
	dest := []any{&b.Current, &b.Earnings, &first, &id, &typ, &credit, &flex, &start, &end, &settlement, &status, &occurred}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return b, err
		}
		if !scanned {
			setFirstReward(&b, first)
			scanned = true
		}
		if !id.Valid {
			continue // the empty page's row: the balance alone
		}
		if settlement.Valid && settlement.InfinityModifier != pgtype.Finite {
			return b, errors.New("a transaction's settlement date is infinite")
		}
		r.scanned(id, sameText(&typText, typ), sameText(&statusText, status), credit, flex, start, end, settlement, occurred)
		row(&r)
	}
	if err := rows.Err(); err != nil {
		return b, err
	}
	if !scanned {
		return b, errors.New("the page's statement answered no balance")
	}
	return b, nil
}

// sameText is text as a string: the string of the row before (*prev) when the text is the
// same, else a new one, kept in *prev. A page's transactions mostly share their type and
// status, and a string made for each row's would be garbage for every row of every page.
func sameText(prev *string, text []byte) string {
	if string(text) != *prev { // compared in place: no string is made
		*prev = string(text)
	}
	return *prev
}

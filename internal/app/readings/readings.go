// Package readings holds the use case of a household's readings (docs/api.md,
// "Readings"): an organisation sends its assets' readings in batches, each is judged on its
// own (internal/settlement.CheckReadingAt and CheckReadingPower, and whether the asset is the
// caller's), and those accepted are stored in PostgreSQL in one SQL transaction, a reading
// sent again (same asset, label, start and end) replacing the earlier value. It speaks no HTTP.
package readings

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/validation"
)

// Reading is one reading as sent: the asset's API id, what it measures, its interval and value.
type Reading struct {
	AssetID string
	Label   settlement.Label
	Start   time.Time
	End     time.Time
	Value   float64
}

// Outcome is what became of one reading: accepted (stored), or rejected with the reason.
type Outcome struct {
	Accepted bool
	// Error says why a rejected reading was (empty when accepted).
	Error string
}

// The reasons a reading is rejected beside settlement.CheckReading's.
const (
	// ErrUnknownAsset is an asset the caller does not have: none with that id, or another
	// organisation's (told alike, so that another organisation's ids reveal nothing).
	ErrUnknownAsset = "Asset not found or not authorized"
	// ErrNoSite is an asset that belongs to no site (declared without one): its readings
	// could count towards nothing.
	ErrNoSite = "the asset belongs to no site"
)

// ErrDatabaseUnavailable answers a batch the database could not take now: nothing of it is
// stored; the caller tries again.
var ErrDatabaseUnavailable = &app.Error{Kind: app.Unavailable,
	Detail: "The readings store is unavailable; nothing was stored, retry", RetryAfter: db.RetryAfterSeconds}

// The leader makes partitions ahead (db.ReadingPartitions, registered by cmd/manager) for
// readings that start from PartitionsBack months ago to PartitionsAhead months ahead; a
// request never makes one. Older readings are refused (settlement.MaxAge, within
// PartitionsBack), and no reading starts later than the span (settlement.MaxLead is less);
// one stored outside the partitions lands in the default partition, and the leader's next
// round moves it into its month's.
const (
	PartitionsBack  = 36
	PartitionsAhead = 2
)

// Config wires the readings to the cluster and the database.
type Config struct {
	Log logr.Logger
	// Cache is the manager's cache (with the internal/index indexes): assets and sites are
	// found there.
	Cache client.Reader
	// DB is Flexsite's PostgreSQL (required).
	DB *pgxpool.Pool
	// Now is the clock (tests replace it).
	Now func() time.Time
}

// Service runs the readings use case.
type Service struct {
	Config
}

// New builds the readings use case.
func New(cfg Config) *Service {
	if cfg.DB == nil {
		panic("readings.New: Config.DB is required (the readings are the database's)")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{Config: cfg}
}

// owner is where an asset's readings are stored: its organisation, site and asset ids.
type owner struct {
	siteID, assetID string
	// plausibleW bounds the asset's readings' power (settlement.CheckReadingPower): the
	// site's settlement.PlausiblePowerW.
	plausibleW int64
	// reason rejects the asset's readings (empty: accepted).
	reason string
}

// Ingest judges each reading of an organisation's batch and stores those accepted, in one SQL
// transaction: out[i] is what became of in[i]. A reading sent twice in one batch counts
// once, the later value. When the database cannot take the batch, nothing of it is stored and
// the error is ErrDatabaseUnavailable.
func (s *Service) Ingest(ctx context.Context, p *auth.Principal, in []Reading) ([]Outcome, error) {
	out, rows, err := s.judge(ctx, p, in)
	if err != nil {
		return nil, err
	}
	if err := s.store(ctx, p.Namespace, rows); err != nil {
		return nil, err
	}
	return out, nil
}

// Check judges a batch as Ingest does, and stores nothing: a door that must refuse a request
// whole when one of its readings would be rejected asks first (the OpenADR door's reports).
func (s *Service) Check(ctx context.Context, p *auth.Principal, in []Reading) ([]Outcome, error) {
	out, _, err := s.judge(ctx, p, in)
	return out, err
}

// judge judges each reading of a batch: out[i] is what becomes of in[i]; rows are those
// accepted, with their sites.
func (s *Service) judge(ctx context.Context, p *auth.Principal, in []Reading) ([]Outcome, []row, error) {
	if p == nil || p.Kind != auth.KindOrganisation {
		return nil, nil, app.Fail(app.Forbidden, "Readings are sent with an organisation's token")
	}
	now := s.Now()
	out := make([]Outcome, len(in))
	owners := map[string]owner{}
	rows := make([]row, 0, len(in))
	for i, r := range in {
		o, ok := owners[r.AssetID]
		if !ok {
			var err error
			if o, err = s.owner(ctx, p.Namespace, r.AssetID); err != nil {
				return nil, nil, err
			}
			owners[r.AssetID] = o
		}
		reason := o.reason
		if reason == "" {
			reading := settlement.Reading{Start: r.Start, End: r.End, Value: r.Value}
			err := settlement.CheckReadingAt(r.Label, reading, now)
			if err == nil {
				err = settlement.CheckReadingPower(r.Label, reading, o.plausibleW)
			}
			if err != nil {
				reason = err.Error()
			}
		}
		if reason != "" {
			out[i] = Outcome{Error: reason}
			continue
		}
		out[i] = Outcome{Accepted: true}
		r.AssetID = o.assetID
		rows = append(rows, row{siteID: o.siteID, Reading: r, order: i})
	}
	return out, rows, nil
}

// owner finds the organisation's live asset with API id id in the cache, and its site.
func (s *Service) owner(ctx context.Context, ns, id string) (owner, error) {
	id, err := validation.ParseUUID(id)
	if err != nil {
		return owner{reason: ErrUnknownAsset}, nil
	}
	assets, err := index.NewLookup(s.Cache).AssetsByID(ctx, ns, id)
	if err != nil {
		return owner{}, err
	}
	var asset *flexv1.Asset
	for _, a := range assets {
		if a.DeletionTimestamp.IsZero() {
			asset = a
			break
		}
	}
	if asset == nil {
		return owner{reason: ErrUnknownAsset}, nil
	}
	if asset.Spec.SiteName == "" {
		return owner{reason: ErrNoSite}, nil
	}
	site := &flexv1.Site{}
	if err := s.Cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: asset.Spec.SiteName}, site); err != nil {
		if apierrors.IsNotFound(err) {
			return owner{reason: ErrNoSite}, nil
		}
		return owner{}, err
	}
	siteID := site.Labels[flexv1.IDLabel]
	if siteID == "" {
		return owner{reason: ErrNoSite}, nil
	}
	rated, err := householdstore.RatedPowerW(ctx, s.Cache, ns, site.Name)
	if err != nil {
		return owner{}, err
	}
	return owner{siteID: siteID, assetID: id, plausibleW: settlement.PlausiblePowerW(rated)}, nil
}

// row is an accepted reading with its site, and its place in the batch.
type row struct {
	Reading
	siteID string
	order  int
}

// The readings table's name and the columns a batch writes (received_at takes its default).
var (
	readingsTable   = pgx.Identifier{"readings"}
	readingsColumns = []string{"organisation", "site_id", "asset_id", "label", "start_at", "end_at", "value"}
)

// upsert stores a batch in one statement: the rows travel as arrays (pgx's binary encoding,
// one round trip) and replace the values stored under the same key.
const upsert = `INSERT INTO readings (organisation, site_id, asset_id, label, start_at, end_at, value)
SELECT $1, s, a, l, st, en, v
FROM unnest($2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::timestamptz[], $7::float8[]) AS t(s, a, l, st, en, v)
ON CONFLICT (organisation, site_id, asset_id, label, start_at, end_at)
DO UPDATE SET value = EXCLUDED.value, received_at = EXCLUDED.received_at`

// store writes the rows in one statement, all or nothing. Readings are mostly new: the batch
// is first COPYed into the table (the database's fastest way in); when one of its keys is
// already stored the COPY fails whole (a unique violation: nothing of it stays) and the batch
// is upserted instead, replacing the values stored under those keys.
func (s *Service) store(ctx context.Context, org string, rows []row) error {
	if len(rows) == 0 {
		return nil
	}
	rows = keyed(rows)
	_, err := s.DB.CopyFrom(ctx, readingsTable, readingsColumns, pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		r := &rows[i]
		return []any{org, r.siteID, r.AssetID, string(r.Label), r.Start, r.End, r.Value}, nil
	}))
	var ce *db.ConstraintError
	if err == nil || !errors.As(db.Classify(err), &ce) || ce.Kind != "unique" {
		return s.failed(err)
	}
	n := len(rows)
	sites, assets, labels := make([]string, n), make([]string, n), make([]string, n)
	starts, ends, values := make([]time.Time, n), make([]time.Time, n), make([]float64, n)
	for i, r := range rows {
		sites[i], assets[i], labels[i] = r.siteID, r.AssetID, string(r.Label)
		starts[i], ends[i], values[i] = r.Start, r.End, r.Value
	}
	if _, err := s.DB.Exec(ctx, upsert, org, sites, assets, labels, starts, ends, values); err != nil {
		return s.failed(err)
	}
	return nil
}

// keyed sorts the rows by their key, keeping of rows with the same key the last sent (ON
// CONFLICT cannot change one row twice in a statement). The order also keeps two batches
// that share keys from deadlocking on each other.
func keyed(rows []row) []row {
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(cmp.Compare(a.siteID, b.siteID), cmp.Compare(a.AssetID, b.AssetID),
			cmp.Compare(a.Label, b.Label), a.Start.Compare(b.Start), a.End.Compare(b.End), cmp.Compare(a.order, b.order))
	})
	out := rows[:0]
	for _, r := range rows {
		if k := len(out) - 1; k >= 0 && out[k].siteID == r.siteID && out[k].AssetID == r.AssetID &&
			out[k].Label == r.Label && out[k].Start.Equal(r.Start) && out[k].End.Equal(r.End) {
			out[k] = r
			continue
		}
		out = append(out, r)
	}
	return out
}

// failed is a database error as the caller is told it: unavailable (try again), or internal
// (nil: none).
func (s *Service) failed(err error) error {
	if err == nil {
		return nil
	}
	if db.Unavailable(err) {
		s.Log.Info("readings not stored: the database is unavailable", "error", err.Error())
		return ErrDatabaseUnavailable
	}
	return db.Classify(err)
}

package vtnstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flexsite/flexsite/internal/db"
)

// The store's refusals (besides db.ErrUnavailable, wrapped).
var (
	// ErrNotFound: no such VEN, resource or report in the organisation.
	ErrNotFound = errors.New("not found")
	// ErrNameTaken: another VEN of the organisation has the venName.
	ErrNameTaken = errors.New("the VEN name is taken")
	// ErrHeld: another VEN of the organisation holds the asset (openadr_resources_held_once).
	ErrHeld = errors.New("the asset is held by another VEN")
	// ErrFull: the bound on VENs or resources is reached.
	ErrFull = errors.New("the bound is reached")
)

// Values is one of the document's valuesMap objects (a target or an attribute): its type and
// values, kept as JSON.
type Values struct {
	Type   string `json:"type"`
	Values []any  `json:"values"`
}

// VEN is a VEN as stored.
type VEN struct {
	ID uuid.UUID
	// ClientName is the API client that registered it and speaks for it.
	ClientName string
	Name       string
	Attributes []Values
	Targets    []Values
	Created    time.Time
	Modified   time.Time
}

// Resource is a resource as stored: Name is an asset's asset_id.
type Resource struct {
	ID, VENID  uuid.UUID
	Name       string
	Attributes []Values
	Targets    []Values
	Created    time.Time
	Modified   time.Time
}

// Query is a search: the organisation, the client whose objects alone are answered (empty:
// every client's), a name (empty: any), a target (type and any of values; empty: any), and the
// page.
type Query struct {
	Organisation string
	ClientName   string
	Name         string
	TargetType   string
	TargetValues []string
	// NameTarget is the target type that names the object itself (VEN_NAME, RESOURCE_NAME):
	// a search by it matches the object's name as well as its targets.
	NameTarget  string
	Skip, Limit int
}

func valuesJSON(v []Values) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

func scanValues(raw []byte) ([]Values, error) {
	if raw == nil {
		return nil, nil
	}
	var v []Values
	err := json.Unmarshal(raw, &v)
	return v, err
}

// lockKey serialises the writes a bound counts (advisory transaction locks, one per
// organisation's VENs, one per client's resources).
func lockKey(tx pgx.Tx, ctx context.Context, parts ...string) error {
	_, err := tx.Exec(ctx, lockSQL, lockName(parts...))
	return err
}

// lockSQL takes the transaction's lock of a name (lockName).
const lockSQL = `SELECT pg_advisory_xact_lock(hashtextextended($1, 52))`

func lockName(parts ...string) string { return strings.Join(parts, "/") }

// CreateVEN stores a new VEN, refusing ErrNameTaken when its name is another's of the
// organisation and ErrFull when the organisation has maxVENs already (counted under a lock,
// so racing creations cannot pass the bound).
func (s *Store) CreateVEN(ctx context.Context, organisation string, v VEN, maxVENs int) error {
	attrs, err := valuesJSON(v.Attributes)
	if err != nil {
		return err
	}
	targets, err := valuesJSON(v.Targets)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		if err := lockKey(tx, ctx, "openadr_vens", organisation); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM openadr_vens WHERE organisation = $1 LIMIT $2) v`,
			organisation, maxVENs).Scan(&n); err != nil {
			return err
		}
		if n >= maxVENs {
			return ErrFull
		}
		_, err := tx.Exec(ctx, `INSERT INTO openadr_vens (organisation, id, client_name, ven_name, attributes, targets,
			created_at, modified_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`,
			organisation, v.ID, v.ClientName, v.Name, attrs, targets, v.Created.UTC())
		return err
	})
}

// tx runs f in a transaction, its errors classified: a unique refusal of a VEN's name is
// ErrNameTaken, of a held asset ErrHeld.
func (s *Store) tx(ctx context.Context, f func(pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.Pool, f)
	if errors.Is(err, ErrFull) || errors.Is(err, ErrNotFound) {
		return err
	}
	return s.refusal(err)
}

func (s *Store) refusal(err error) error {
	err = s.classify(err)
	var ce *db.ConstraintError
	if errors.As(err, &ce) && ce.Kind == "unique" {
		switch ce.Constraint {
		case "openadr_vens_name":
			return ErrNameTaken
		case "openadr_resources_held_once":
			return ErrHeld
		}
	}
	if errors.Is(err, db.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

const venColumns = `id, client_name, ven_name, attributes, targets, created_at, modified_at`

func scanVEN(row pgx.Row) (VEN, error) {
	var v VEN
	var attrs, targets []byte
	if err := row.Scan(&v.ID, &v.ClientName, &v.Name, &attrs, &targets, &v.Created, &v.Modified); err != nil {
		return VEN{}, err
	}
	var err error
	if v.Attributes, err = scanValues(attrs); err != nil {
		return VEN{}, err
	}
	if v.Targets, err = scanValues(targets); err != nil {
		return VEN{}, err
	}
	return v, nil
}

// VEN is the organisation's VEN id, or ErrNotFound.
func (s *Store) VEN(ctx context.Context, organisation string, id uuid.UUID) (VEN, error) {
	v, err := scanVEN(s.Pool.QueryRow(ctx, `SELECT `+venColumns+` FROM openadr_vens
		WHERE organisation = $1 AND id = $2`, organisation, id))
	return v, s.refusal(err)
}

// targetFilter is the SQL condition for q's target ($n and $n+1 its type and values), or "".
func targetFilter(q Query, nameColumn string, n int) (string, []any) {
	if q.TargetType == "" {
		return "", nil
	}
	cond := fmt.Sprintf(`EXISTS (SELECT 1 FROM jsonb_array_elements(COALESCE(targets, '[]'::jsonb)) t
		WHERE jsonb_typeof(t) = 'object' AND t->>'type' = $%d
		AND (cardinality($%d::text[]) = 0 OR (jsonb_typeof(t->'values') = 'array' AND t->'values' ?| $%d::text[])))`, n, n+1, n+1)
	if q.NameTarget != "" && q.TargetType == q.NameTarget {
		cond = fmt.Sprintf(`(%s OR %s = ANY($%d::text[]))`, cond, nameColumn, n+1)
	}
	values := q.TargetValues
	if values == nil {
		values = []string{}
	}
	return " AND " + cond, []any{q.TargetType, values}
}

// VENs answers a page of the organisation's VENs that q names, oldest first.
func (s *Store) VENs(ctx context.Context, q Query) ([]VEN, error) {
	sql := `SELECT ` + venColumns + ` FROM openadr_vens WHERE organisation = $1
		AND ($2 = '' OR client_name = $2) AND ($3 = '' OR ven_name = $3)`
	cond, more := targetFilter(q, "ven_name", 4)
	sql += cond
	args := append([]any{q.Organisation, q.ClientName, q.Name}, more...)
	sql += fmt.Sprintf(` ORDER BY created_at, id OFFSET $%d LIMIT $%d`, len(args)+1, len(args)+2)
	args = append(args, q.Skip, q.Limit)
	rows, err := s.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, s.classify(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (VEN, error) { return scanVEN(r) })
	return out, s.classify(err)
}

// UpdateVEN changes the VEN's name, attributes and targets (its id, owner and creation stay):
// ErrNotFound, or ErrNameTaken.
func (s *Store) UpdateVEN(ctx context.Context, organisation string, v VEN) (VEN, error) {
	attrs, err := valuesJSON(v.Attributes)
	if err != nil {
		return VEN{}, err
	}
	targets, err := valuesJSON(v.Targets)
	if err != nil {
		return VEN{}, err
	}
	out, err := scanVEN(s.Pool.QueryRow(ctx, `UPDATE openadr_vens SET ven_name = $3, attributes = $4, targets = $5,
		modified_at = $6 WHERE organisation = $1 AND id = $2 RETURNING `+venColumns,
		organisation, v.ID, v.Name, attrs, targets, v.Modified.UTC()))
	return out, s.refusal(err)
}

// DeleteVEN deletes the VEN and its resources (released), answering it as it was.
func (s *Store) DeleteVEN(ctx context.Context, organisation string, id uuid.UUID) (VEN, error) {
	v, err := scanVEN(s.Pool.QueryRow(ctx, `DELETE FROM openadr_vens WHERE organisation = $1 AND id = $2
		RETURNING `+venColumns, organisation, id))
	return v, s.refusal(err)
}

const resourceColumns = `id, ven_id, resource_name, attributes, targets, created_at, modified_at`

func scanResource(row pgx.Row) (Resource, error) {
	var r Resource
	var attrs, targets []byte
	if err := row.Scan(&r.ID, &r.VENID, &r.Name, &attrs, &targets, &r.Created, &r.Modified); err != nil {
		return Resource{}, err
	}
	var err error
	if r.Attributes, err = scanValues(attrs); err != nil {
		return Resource{}, err
	}
	if r.Targets, err = scanValues(targets); err != nil {
		return Resource{}, err
	}
	return r, nil
}

// CreateResource stores a resource of the VEN: ErrNotFound when the VEN is not the
// organisation's (or is being deleted), ErrHeld when another VEN of the organisation holds
// the asset, ErrFull when the VENs of the VEN's client hold maxHeld resources already
// (counted under a lock per client).
func (s *Store) CreateResource(ctx context.Context, organisation string, r Resource, maxHeld int) error {
	attrs, err := valuesJSON(r.Attributes)
	if err != nil {
		return err
	}
	targets, err := valuesJSON(r.Targets)
	if err != nil {
		return err
	}
	return s.tx(ctx, func(tx pgx.Tx) error {
		var client string
		if err := tx.QueryRow(ctx, `SELECT client_name FROM openadr_vens WHERE organisation = $1 AND id = $2 FOR SHARE`,
			organisation, r.VENID).Scan(&client); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		if err := lockKey(tx, ctx, "openadr_resources", organisation, client); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM openadr_resources r
			JOIN openadr_vens v ON v.organisation = r.organisation AND v.id = r.ven_id
			WHERE v.organisation = $1 AND v.client_name = $2 LIMIT $3) h`, organisation, client, maxHeld).Scan(&n); err != nil {
			return err
		}
		if n >= maxHeld {
			return ErrFull
		}
		_, err := tx.Exec(ctx, `INSERT INTO openadr_resources (organisation, id, ven_id, resource_name, attributes, targets,
			created_at, modified_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`,
			organisation, r.ID, r.VENID, r.Name, attrs, targets, r.Created.UTC())
		return err
	})
}

// Resource is the VEN's resource id, or ErrNotFound.
func (s *Store) Resource(ctx context.Context, organisation string, venID, id uuid.UUID) (Resource, error) {
	r, err := scanResource(s.Pool.QueryRow(ctx, `SELECT `+resourceColumns+` FROM openadr_resources
		WHERE organisation = $1 AND ven_id = $2 AND id = $3`, organisation, venID, id))
	return r, s.refusal(err)
}

// Resources answers a page of the VEN's resources that q names (q.ClientName is not used:
// the caller has judged the VEN), oldest first.
func (s *Store) Resources(ctx context.Context, venID uuid.UUID, q Query) ([]Resource, error) {
	sql := `SELECT ` + resourceColumns + ` FROM openadr_resources WHERE organisation = $1 AND ven_id = $2
		AND ($3 = '' OR resource_name = $3)`
	cond, more := targetFilter(q, "resource_name", 4)
	sql += cond
	args := append([]any{q.Organisation, venID, q.Name}, more...)
	sql += fmt.Sprintf(` ORDER BY created_at, id OFFSET $%d LIMIT $%d`, len(args)+1, len(args)+2)
	args = append(args, q.Skip, q.Limit)
	rows, err := s.Pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, s.classify(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Resource, error) { return scanResource(r) })
	return out, s.classify(err)
}

// UpdateResource changes the resource's name (another asset: ErrHeld when another VEN holds
// it), attributes and targets: ErrNotFound when the VEN has no such resource.
func (s *Store) UpdateResource(ctx context.Context, organisation string, r Resource) (Resource, error) {
	attrs, err := valuesJSON(r.Attributes)
	if err != nil {
		return Resource{}, err
	}
	targets, err := valuesJSON(r.Targets)
	if err != nil {
		return Resource{}, err
	}
	out, err := scanResource(s.Pool.QueryRow(ctx, `UPDATE openadr_resources SET resource_name = $4, attributes = $5,
		targets = $6, modified_at = $7 WHERE organisation = $1 AND ven_id = $2 AND id = $3 RETURNING `+resourceColumns,
		organisation, r.VENID, r.ID, r.Name, attrs, targets, r.Modified.UTC()))
	return out, s.refusal(err)
}

// DeleteResource deletes the VEN's resource (the asset is released), answering it as it was.
func (s *Store) DeleteResource(ctx context.Context, organisation string, venID, id uuid.UUID) (Resource, error) {
	r, err := scanResource(s.Pool.QueryRow(ctx, `DELETE FROM openadr_resources WHERE organisation = $1 AND ven_id = $2
		AND id = $3 RETURNING `+resourceColumns, organisation, venID, id))
	return r, s.refusal(err)
}

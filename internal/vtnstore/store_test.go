package vtnstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/vtnstore"
)

var testDB *dbtest.Database

func TestMain(m *testing.M) {
	dbtest.Main(m, &testDB)
}

func TestAssetsHeldByOneClientsVENsOnly(t *testing.T) {
	ctx := context.Background()
	s := &vtnstore.Store{Pool: testDB.Pool}
	ven := func(org, client, name string) uuid.UUID {
		id := uuid.New()
		if _, err := testDB.Pool.Exec(ctx, `INSERT INTO openadr_vens (organisation, id, client_name, ven_name)
			VALUES ($1, $2, $3, $4)`, org, id, client, name); err != nil {
			t.Fatal(err)
		}
		return id
	}
	hold := func(org string, venID uuid.UUID, asset string) error {
		_, err := testDB.Pool.Exec(ctx, `INSERT INTO openadr_resources (organisation, id, ven_id, resource_name)
			VALUES ($1, $2, $3, $4)`, org, uuid.New(), venID, asset)
		return db.Classify(err)
	}
	a1, a2 := ven("org-a", "ven-client", "ven-1"), ven("org-a", "ven-client", "ven-2")
	other := ven("org-a", "other-client", "ven-3")
	b := ven("org-b", "ven-client", "ven-1")
	for _, h := range []struct {
		org   string
		ven   uuid.UUID
		asset string
	}{{"org-a", a1, "asset-2"}, {"org-a", a2, "asset-1"}, {"org-a", other, "asset-3"}, {"org-b", b, "asset-4"}} {
		if err := hold(h.org, h.ven, h.asset); err != nil {
			t.Fatal(err)
		}
	}
	var constraint *db.ConstraintError
	if err := hold("org-a", other, "asset-1"); !errors.As(err, &constraint) || constraint.Kind != "unique" {
		t.Fatalf("a second VEN of the organisation holding asset-1: %v, want a unique refusal", err)
	}
	if err := hold("org-b", b, "asset-1"); err != nil {
		t.Fatalf("another organisation's asset of the same id is its own: %v", err)
	}
	got, err := s.AssetsHeldBy(ctx, "org-a", "ven-client")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"asset-1", "asset-2"}) {
		t.Fatalf("held by org-a's ven-client: %v", got)
	}
	if _, err := testDB.Pool.Exec(ctx, `DELETE FROM openadr_vens WHERE organisation = 'org-a' AND id = $1`, a1); err != nil {
		t.Fatal(err)
	}
	if got, err = s.AssetsHeldBy(ctx, "org-a", "ven-client"); err != nil || !slices.Equal(got, []string{"asset-1"}) {
		t.Fatalf("a deleted VEN's resources are released: %v %v", got, err)
	}
}

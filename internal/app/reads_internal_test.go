package app

import (
	"testing"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// A site read by id (a transactions page, a battery schedule) costs no allocation once found:
// held by id until it changes (index.KeptSites), where the store's lookup allocates its
// matches on every read. A change is seen by the next read.
func TestSiteToReadAllocations(t *testing.T) {
	f := newEligibilityFixture(t, 100)
	ctx := t.Context()
	site, err := f.svc.SiteToRead(ctx, benchOrg, "id-7")
	if err != nil || site.Name != "site-7" {
		t.Fatal(site, err)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if _, err := f.svc.SiteToRead(ctx, benchOrg, "id-7"); err != nil {
			t.Fatal(err)
		}
	}); allocs > 0 {
		t.Fatalf("%.0f allocations a read of a found site", allocs)
	}
	moved := site.DeepCopy()
	moved.Labels[flexv1.IDLabel] = "id-moved"
	if err := f.sites.Update(moved); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.SiteToRead(ctx, benchOrg, "id-7"); err == nil {
		t.Fatal("the site was still read by the id it no longer has")
	}
	if got, err := f.svc.SiteToRead(ctx, benchOrg, "id-moved"); err != nil || got != moved {
		t.Fatal(got, err)
	}
}

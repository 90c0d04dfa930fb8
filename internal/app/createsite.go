package app

import (
	"cmp"
	"context"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/validation"
)

// SiteConflict is the detail of a site refused for the organisation's site at its address.
type SiteConflict struct {
	ExistingSiteID string `json:"existing_site_id"`
	Message        string `json:"message"`
}

// CreateSite creates a site alone (POST /entities/site) as an upsert of no assets would, under
// onboarding's rules, but only creates: the organisation's live site with the MPAN is the legacy
// onboard's conflict, one at the same address (validation.AddressKey) a conflict naming it.
func (s *Service) CreateSite(ctx context.Context, p *auth.Principal, in SiteInput) (out LegacySiteRecord, err error) {
	if err := in.checkEmail(); err != nil {
		return out, err
	}
	rules, err := householdstore.LoadRules(ctx, s.Cache)
	if err != nil {
		return out, err
	}
	err = s.transact(ctx, func(st store, log *writeLog) error {
		_, err := s.writeUpsert(ctx, st, log, p.Namespace, upsertRequest{site: in}, rules, func(plan *upsertPlan) error {
			out = legacySiteRecord(p, plan.site, nil, false) // as it will be written: the answer once it is
			found, err := st.lookup.SitesByAddress(ctx, p.Namespace, validation.AddressKey(plan.site.Spec.StreetAddress, plan.site.Spec.Postcode))
			for _, other := range found { // the cached objects themselves: read only
				if id := other.Labels[flexv1.IDLabel]; other.DeletionTimestamp.IsZero() && other.Name != plan.site.Name {
					return &Error{Kind: Conflict, Detail: SiteConflict{ExistingSiteID: id, Message: "A site with the same address already exists: " + id}}
				}
			}
			return cmp.Or(siteExists(plan, log, in.MPAN), err) // its MPAN's site, skipped above, is the MPAN's conflict
		})
		return err
	})
	return out, err
}

// siteExists refuses a new site whose MPAN a live site has (not one this request created).
func siteExists(plan *upsertPlan, log *writeLog, mpan string) error {
	if plan.siteBefore != nil && !log.wasCreated(plan.site) {
		return Fail(Conflict, "Site with MPAN %s already exists", mpan)
	}
	return nil
}

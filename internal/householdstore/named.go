package householdstore

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
)

// A site's children that are named after it (internal/identity) are read by GET of that name:
// never a LIST, whose cost grows with the namespace (docs/scale.md, "Request paths: no LIST").

// NamedEnrolment is the site's Enrolment in p under the name the API gives it
// (identity.EnrolmentName, household.NewEnrolment), read from r; nil when there is none.
func NamedEnrolment(ctx context.Context, r client.Reader, site *flexv1.Site, p flexv1.PropositionName) (*flexv1.Enrolment, error) {
	e := &flexv1.Enrolment{}
	err := r.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: identity.EnrolmentName(site.Name, p)}, e)
	if err != nil || e.Spec.SiteName != site.Name || e.Spec.Proposition != p {
		return nil, client.IgnoreNotFound(err)
	}
	return e, nil
}

// LedgerOf is the site's RewardLedger (one per site, named after it: identity.RewardLedgerName),
// read from r; nil when there is none.
func LedgerOf(ctx context.Context, r client.Reader, site *flexv1.Site) (*flexv1.RewardLedger, error) {
	ledger := &flexv1.RewardLedger{}
	err := r.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: identity.RewardLedgerName(site.Name)}, ledger)
	if err != nil || ledger.Spec.SiteName != site.Name {
		return nil, client.IgnoreNotFound(err)
	}
	return ledger, nil
}

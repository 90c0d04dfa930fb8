package app

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/metrics"
)

// EndUserInput asks for an end user's token: who they are to the organisation, the origin
// their browser embeds the flow from (normalised as a browser's Origin header spells it), and
// what the organisation knows of them.
type EndUserInput struct {
	ExternalUserID string
	AllowedOrigin  string
	// Email, when not nil, is the user's email (empty: none); nil leaves a stored one as it is.
	Email *string
	// Consent is the user's boundary meter consent, if given.
	Consent *time.Time
}

// EndUserToken is the end user's token and their household's site id.
type EndUserToken struct {
	SiteID      string
	AccessToken string
}

// IssueEndUserToken finds or creates the end user (and the site that is theirs) by the
// organisation's external user id and issues a token for that one site. A new end user must
// come with consent unless the API client is exempt.
func (s *Service) IssueEndUserToken(ctx context.Context, p *auth.Principal, in EndUserInput) (EndUserToken, error) {
	ns := &corev1.Namespace{}
	if err := s.Cache.Get(ctx, client.ObjectKey{Name: p.Namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return EndUserToken{}, Fail(NotFound, "Organisation not found")
		}
		return EndUserToken{}, err
	}
	apiClient := &flexv1.APIClient{}
	if err := s.Cache.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.ClientName}, apiClient); err != nil {
		return EndUserToken{}, err
	}

	var site *flexv1.Site
	err := s.transact(ctx, func(st store, log *writeLog) error {
		current, err := st.siteByExternalUser(ctx, p.Namespace, in.ExternalUserID)
		if err != nil {
			return err
		}
		if current == nil && st.cached {
			// The cache may not have seen this user's site yet: ask the API server before
			// treating them as new (a new user must send consent).
			return errRetry
		}
		if current == nil {
			if in.Consent == nil && !apiClient.Spec.ConsentExempt {
				return InvalidFields(Field("Field required on the first call for a new external_user_id",
					"missing", "body", "gave_boundary_meter_consent_at"))
			}
			site = household.NewSite(p.Namespace, identity.SiteNameForExternalUser(in.ExternalUserID))
			site.Annotations = map[string]string{flexv1.UserIDAnnotation: identity.NewID()}
			household.GrantOrigin(site, in.AllowedOrigin)
			site.Spec.ExternalUserID = in.ExternalUserID
			if in.Email != nil {
				site.Spec.Email = *in.Email
			}
			if in.Consent != nil {
				site.Spec.BoundaryMeterConsentAt = &metav1.Time{Time: in.Consent.UTC()}
			}
			return s.create(ctx, log, site)
		}
		site = current.DeepCopy()
		changed := household.MergeSite(&site.Spec, household.SiteFields{Consent: in.Consent, Email: in.Email})
		household.EnsureID(site)
		if site.Annotations[flexv1.UserIDAnnotation] == "" {
			if site.Annotations == nil {
				site.Annotations = map[string]string{}
			}
			site.Annotations[flexv1.UserIDAnnotation] = identity.NewID()
			changed = append(changed, "user_id")
		}
		if household.GrantOrigin(site, in.AllowedOrigin) {
			changed = append(changed, "allowed_origin")
		}
		return s.write(ctx, log, site, current, changed)
	})
	if err != nil {
		return EndUserToken{}, err
	}
	// The token names the end user (its subject, which also tells a namesake site recreated
	// after an offboard from this one); the answer's id is the household's site id, which the
	// organisation uses in every later request about this user.
	token, _, err := s.Issuer.IssueEndUserToken(auth.Principal{
		Kind: auth.KindEndUser, Namespace: p.Namespace, ClientName: p.ClientName, Username: p.Username,
		SiteName: site.Name, UserID: site.Annotations[flexv1.UserIDAnnotation], AllowedOrigin: in.AllowedOrigin,
	})
	if err != nil {
		return EndUserToken{}, err
	}
	metrics.TokensIssued.WithLabelValues(metrics.TokenEndUser).Inc()
	return EndUserToken{SiteID: site.Labels[flexv1.IDLabel], AccessToken: token}, nil
}

// HouseholdView is what the end user's own flow shows of their household: the site, its live
// assets (by name) and the propositions it is enrolled in (sorted; enrolments being deleted
// left out), and the asset-model catalogue.
type HouseholdView struct {
	Site     *flexv1.Site
	Assets   []flexv1.Asset
	Enrolled []flexv1.PropositionName
	Models   []flexv1.AssetModel
}

// Household is the end user's own household (HouseholdView). The site and assets are
// read-only.
func (s *Service) Household(ctx context.Context, p *auth.Principal) (HouseholdView, error) {
	site, err := s.OwnSite(ctx, p)
	if err != nil {
		return HouseholdView{}, err
	}
	assets, enrolled, err := s.householdObjects(ctx, site)
	if err != nil {
		return HouseholdView{}, err
	}
	models := &flexv1.AssetModelList{}
	if err := s.Cache.List(ctx, models); err != nil {
		return HouseholdView{}, err
	}
	return HouseholdView{Site: site, Assets: assets, Enrolled: enrolled, Models: models.Items}, nil
}

// householdObjects are a site's live assets (by name) and the propositions it is enrolled in
// (sorted; enrolments being deleted left out).
func (s *Service) householdObjects(ctx context.Context, site *flexv1.Site) ([]flexv1.Asset, []flexv1.PropositionName, error) {
	assets, err := s.store(false).assetsOf(ctx, site)
	if err != nil {
		return nil, nil, err
	}
	enrolments, err := s.store(true).enrolmentsOf(ctx, site)
	if err != nil {
		return nil, nil, err
	}
	slices.SortFunc(assets, func(a, b flexv1.Asset) int { return strings.Compare(a.Name, b.Name) })
	enrolled := []flexv1.PropositionName{}
	for _, e := range enrolments {
		if e.DeletionTimestamp.IsZero() && !slices.Contains(enrolled, e.Spec.Proposition) {
			enrolled = append(enrolled, e.Spec.Proposition)
		}
	}
	slices.Sort(enrolled)
	return assets, enrolled, nil
}

// HouseholdEligibility is the end user's own household with its eligibility, as the
// REST API's GET eligibility answers it (Eligibility; Models left empty).
func (s *Service) HouseholdEligibility(ctx context.Context, p *auth.Principal) (HouseholdView, *EligibilityRecord, error) {
	site, err := s.OwnSite(ctx, p)
	if err != nil {
		return HouseholdView{}, nil, err
	}
	rec, err := s.Eligibility(ctx, p, site.Labels[flexv1.IDLabel])
	if err != nil {
		return HouseholdView{}, nil, err
	}
	assets, enrolled, err := s.householdObjects(ctx, site)
	if err != nil {
		return HouseholdView{}, nil, err
	}
	return HouseholdView{Site: site, Assets: assets, Enrolled: enrolled}, rec, nil
}

package facade

import (
	"net/http"
	"regexp"
	"strings"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/validation"
)

var allTariffTypes = []flexv1.TariffType{"single_rate", "dual_rate", "dynamic", "smart", "unknown"}

// tariffTime is the CRD's pattern for a cheap-rate boundary (HH:MM or HH:MM:SS).
var tariffTime = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9])?$`)

// siteUpdate is a PATCH /entities/site/{site_id} body: what is sent changes, nothing else.
type siteUpdate struct {
	fields household.SiteFields
	mpan   string // normalised; empty when not sent
}

func parseSiteUpdate(f *fields, body map[string]any) siteUpdate {
	var in siteUpdate
	loc := []any{"body"}
	if mpan, ok := f.str(body, loc, "mpan", false); ok && mpan != "" {
		if norm, err := validation.NormaliseMPAN(mpan); err != nil {
			f.addValidation(err, at(loc, "mpan"))
		} else {
			in.mpan = norm
		}
	}
	if pc, ok := f.str(body, loc, "postcode", false); ok && pc != "" {
		if norm, err := validation.NormalisePostcode(pc); err != nil {
			f.addValidation(err, at(loc, "postcode"))
		} else {
			in.fields.Postcode = &norm
		}
	}
	if addr, ok := f.str(body, loc, "address", false); ok {
		in.fields.StreetAddress = &addr
	}
	if email, ok := f.str(body, loc, "email", false); ok && strings.TrimSpace(email) != "" {
		email = strings.TrimSpace(email)
		if err := validation.ValidateEmail(email); err != nil {
			f.add("value is not a valid email address: "+err.Error(), "value_error", at(loc, "email"))
		} else {
			in.fields.Email = &email
		}
	}
	if t, ok := f.object(body, loc, "tariff", false); ok {
		tloc := at(loc, "tariff")
		tariff := &flexv1.Tariff{}
		tariff.Type, _ = enum(f, t, tloc, "tariff_type", true, allTariffTypes)
		// In the body's documented order, so that a 422 names its problems in a stable order.
		for _, field := range []struct {
			key string
			dst *string
		}{{"tariff_cheap_start_time", &tariff.CheapStartTime}, {"tariff_cheap_end_time", &tariff.CheapEndTime}} {
			if v, ok := f.str(t, tloc, field.key, false); ok && v != "" {
				if !tariffTime.MatchString(v) {
					f.add("Input should be a valid time in the format HH:MM[:SS]", "time_parsing", at(tloc, field.key))
				}
				*field.dst = v
			}
		}
		if (tariff.CheapStartTime == "") != (tariff.CheapEndTime == "") {
			f.add("tariff_cheap_start_time and tariff_cheap_end_time go together", "value_error", tloc)
		}
		in.fields.Tariff = tariff
	}
	return in
}

// patchSite changes what the body sends of a site, the change kubectl would make to the Site
// object, and nothing when nothing differs. A new MPAN is claimed first (household.ClaimMPAN):
// the site keeps its name and id, and no moment exists in which two sites hold the MPAN. The
// claim of the MPAN the site leaves is released after; if the request dies between the two,
// the Site controller releases it once stale.
func (s *Server) patchSite(r *http.Request, p *auth.Principal) (any, error) {
	var in siteUpdate
	site, err := s.readSiteAction(r, p, func(f *fields, body map[string]any) { in = parseSiteUpdate(f, body) })
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	var updated, before *flexv1.Site
	var assets []flexv1.Asset
	err = s.transact(ctx, func(st store, log *writeLog) error {
		current, err := st.siteByName(ctx, site.Namespace, site.Name)
		if err != nil {
			return err
		}
		if current == nil || !current.DeletionTimestamp.IsZero() {
			return errSiteNotFound
		}
		// Everything the answer needs is read before the first write: a read that fails after
		// it would answer an error for a change that was made.
		if assets, err = st.assetsOf(ctx, current); err != nil {
			return err
		}
		updated, before = current.DeepCopy(), current
		fields := household.MergeSite(&updated.Spec, in.fields)
		if in.mpan != "" && in.mpan != current.Spec.MPAN {
			claim, err := household.ClaimMPAN(ctx, s.Client, s.APIReader, current, in.mpan, time.Now())
			log.adoptClaim(claim, err)
			if err != nil {
				return mpanTaken(err)
			}
			updated.Spec.MPAN = in.mpan
			fields = append(fields, "mpan")
		}
		household.EnsureID(updated)
		return s.write(ctx, log, updated, current, fields)
	})
	if err != nil {
		return nil, err
	}
	if before.Spec.MPAN != "" && before.Spec.MPAN != updated.Spec.MPAN {
		// Best effort: the Site controller releases a claim left behind once it is stale.
		if err := household.ReleaseClaim(ctx, s.Client, s.APIReader, updated, before.Spec.MPAN); err != nil {
			s.Log.Error(err, "releasing an MPAN claim", "mpan", before.Spec.MPAN)
		}
	}
	return legacySiteRecord(updated, assets, false), nil
}

package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kretry "k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/meters"
)

// An upsert (onboard, initialise) is planned completely before its first write: every
// validation and conflict check runs against what is stored, and the result is the site and
// assets as they should be stored. Only then does apply write, undoing what it wrote if a
// write fails. Object names come from natural keys, so two requests racing to create the same
// site collide in the API server (AlreadyExists), and a stale read shows up as a Conflict on
// update: both mean "plan again from fresh reads", never corruption.

// errRetry marks a write that lost a race; the request is planned again from fresh reads.
var errRetry = errors.New("lost a write race; plan again")

// maxAttempts bounds the plan-and-write loop under contention.
const maxAttempts = 6

type upsertRequest struct {
	site   SiteInput
	assets []AssetInput
}

// upsertPlan is what one request will store.
type upsertPlan struct {
	site       *flexv1.Site // as it should be stored
	siteBefore *flexv1.Site // as stored now; nil when the site is new
	siteFields []string
	assets     []assetPlan
	// others are the site's stored assets the request does not name: they count for eligibility.
	others []flexv1.Asset
	// claim: the new site will hold its MPAN by an MPANClaim, not by its name.
	claim bool
}

type assetPlan struct {
	asset  *flexv1.Asset
	before *flexv1.Asset
	fields []string
}

// eligibility evaluates the site as the plan will store it.
func (p *upsertPlan) eligibility(rules eligibility.Rules) eligibility.Result {
	assets := make([]flexv1.Asset, 0, len(p.assets)+len(p.others))
	for _, a := range p.assets {
		assets = append(assets, *a.asset)
	}
	return household.Evaluate(&p.site.Spec, append(assets, p.others...), rules)
}

func (p *upsertPlan) siteID() string { return p.site.Labels[flexv1.IDLabel] }

// markInFlight marks a site this request creates with what the request writes after it, so
// that if the process dies half-way the Site controller removes the half-written site
// (household.InFlight).
func (p *upsertPlan) markInFlight(deadline time.Time, enrolments ...flexv1.PropositionName) {
	if p.siteBefore != nil {
		return
	}
	marker := household.InFlight{Until: deadline, Enrolments: enrolments}
	for _, a := range p.assets {
		marker.Assets = append(marker.Assets, a.asset.Name)
	}
	marker.Mark(p.site)
}

// planUpsert decides what the request stores, checking every conflict first.
func planUpsert(ctx context.Context, st store, ns string, req upsertRequest, rules eligibility.Rules) (*upsertPlan, error) {
	for i, a := range req.assets {
		if err := knownModel(rules, a.Model, fmt.Sprintf(" (assets[%d].asset_model)", i)); err != nil {
			return nil, err
		}
	}
	existing, err := st.siteByMPAN(ctx, ns, req.site.MPAN)
	if err != nil {
		return nil, err
	}
	plan := &upsertPlan{}
	existing, err = householdOf(ctx, st, ns, req.site, existing)
	if err != nil {
		return nil, err
	}
	if existing == nil {
		name := identity.SiteNameForMPAN(req.site.MPAN)
		taken, err := st.siteByName(ctx, ns, name)
		if err != nil {
			return nil, err
		}
		if taken != nil && (taken.Spec.MPAN != req.site.MPAN || !taken.DeletionTimestamp.IsZero()) {
			// The MPAN's own name is kept by a site that has moved to another meter point or is
			// being deleted: the new site takes another name and holds its MPAN by a claim.
			name = identity.SiteNameForMovedMPAN(req.site.MPAN, identity.NewID())
			plan.claim = true
		}
		plan.site = household.NewSite(ns, name)
		plan.site.Spec.MPAN = req.site.MPAN
		plan.site.Spec.ExternalUserID = req.site.ExternalUserID
		household.MergeSite(&plan.site.Spec, req.site.SiteFields)
	} else {
		plan.siteBefore = existing
		plan.site = existing.DeepCopy()
		plan.siteFields = household.MergeSite(&plan.site.Spec, req.site.SiteFields)
		household.EnsureID(plan.site)
		if plan.site.Spec.MPAN == "" {
			// The household of a component token, created without an MPAN: it takes this one,
			// held by a claim (its name is not the MPAN's).
			plan.site.Spec.MPAN = req.site.MPAN
			plan.siteFields = append(plan.siteFields, "mpan")
			plan.claim = true
		}
		if plan.site.Spec.ExternalUserID == "" && req.site.ExternalUserID != "" {
			plan.site.Spec.ExternalUserID = req.site.ExternalUserID
			plan.siteFields = append(plan.siteFields, "external_user_id")
		}
	}

	named := map[string]bool{}
	for _, in := range req.assets {
		current, err := st.assetByExternalID(ctx, ns, in.ExternalID)
		if err != nil {
			return nil, err
		}
		ap := assetPlan{}
		switch {
		case current == nil:
			ap.asset = newAsset(plan.site, in)
		case current.Spec.SiteName != plan.site.Name:
			return nil, assetConflict(in.ExternalID, current.Labels[flexv1.IDLabel])
		case current.Spec.Type != in.Type:
			return nil, Fail(Conflict, "Asset %q is registered as type %q, not %q",
				in.ExternalID, current.Spec.Type, in.Type)
		default:
			ap.before = current
			ap.asset = current.DeepCopy()
			ap.fields = household.MergeAsset(&ap.asset.Spec, in.AssetFields)
			household.EnsureID(ap.asset)
		}
		named[ap.asset.Name] = true
		plan.assets = append(plan.assets, ap)
	}
	if existing != nil {
		stored, err := st.assetsOf(ctx, existing)
		if err != nil {
			return nil, err
		}
		for _, a := range stored {
			if !named[a.Name] {
				plan.others = append(plan.others, a)
			}
		}
	}
	return plan, nil
}

// householdOf settles which stored site an upsert naming an end user (site.external_user_id)
// fills: the site of its MPAN, or else the end user's own household (the one a component
// token created, which has no MPAN yet). An MPAN and an end user that name two different
// sites are a conflict, and so is an end user whose household already has another MPAN.
func householdOf(ctx context.Context, st store, ns string, in SiteInput, byMPAN *flexv1.Site) (*flexv1.Site, error) {
	if in.ExternalUserID == "" {
		return byMPAN, nil
	}
	byUser, err := st.siteByExternalUser(ctx, ns, in.ExternalUserID)
	if err != nil {
		return nil, err
	}
	switch {
	case byUser == nil:
		if byMPAN != nil && byMPAN.Spec.ExternalUserID != "" && byMPAN.Spec.ExternalUserID != in.ExternalUserID {
			return nil, Fail(Conflict, "MPAN %s belongs to the household of another external_user_id", in.MPAN)
		}
		if byMPAN == nil && st.cached {
			// The cache may not have seen the household a component token created a moment ago.
			return nil, errRetry
		}
		return byMPAN, nil
	case byMPAN != nil && byMPAN.Name != byUser.Name:
		return nil, Fail(Conflict,
			"MPAN %s belongs to another site than the household of external_user_id %q", in.MPAN, in.ExternalUserID)
	case byUser.Spec.MPAN != "" && byUser.Spec.MPAN != in.MPAN:
		return nil, Fail(Conflict, "The household of external_user_id %q has another MPAN (%s)",
			in.ExternalUserID, byUser.Spec.MPAN)
	}
	return byUser, nil
}

// newAsset is a new asset of site as the request describes it.
func newAsset(site *flexv1.Site, in AssetInput) *flexv1.Asset {
	a := household.NewAsset(site, in.ExternalID, in.Type)
	household.MergeAsset(&a.Spec, in.AssetFields)
	return a
}

// writeLog remembers what a request wrote, to undo it if a later write fails.
type writeLog struct {
	// written holds every object as this request last wrote it (with its new version), for
	// the read-your-writes wait.
	written []client.Object
	created []client.Object
	updated []client.Object // the stored versions before this request changed them
	// createdKeys and fields survive retries: an object this request created or changed in an
	// earlier attempt is still "created" or "updated" in its answer.
	createdKeys map[string]bool
	fields      map[string][]string
}

func newWriteLog() *writeLog {
	return &writeLog{createdKeys: map[string]bool{}, fields: map[string][]string{}}
}

// fieldsOf names the API fields this request changed on obj, over all its attempts.
func (l *writeLog) fieldsOf(obj client.Object) []string { return nonNil(l.fields[key(obj)]) }

func (l *writeLog) noteFields(obj client.Object, fields []string) {
	k := key(obj)
	for _, f := range fields {
		if !slices.Contains(l.fields[k], f) {
			l.fields[k] = append(l.fields[k], f)
		}
	}
}

func key(obj client.Object) string {
	return fmt.Sprintf("%T/%s/%s", obj, obj.GetNamespace(), obj.GetName())
}

func (l *writeLog) wasCreated(obj client.Object) bool { return l.createdKeys[key(obj)] }

// adoptClaim records a claim householdstore.ClaimMPAN created (or may have: err says how it failed)
// on the request's behalf, so that a failure undoes it like the request's own writes.
func (l *writeLog) adoptClaim(claim *flexv1.MPANClaim, err error) {
	if claim == nil || (err != nil && !mayHaveApplied(err)) {
		return
	}
	l.created = append(l.created, claim)
	if err == nil {
		l.createdKeys[key(claim)] = true
	}
}

// mayHaveApplied reports whether a failed write may still have happened: the API server timed
// out answering, the connection broke, it failed after storing. Only answers that prove the
// write was refused say no. Rollback undoes a write that may have happened, too.
func mayHaveApplied(err error) bool {
	refused := []func(error) bool{
		apierrors.IsAlreadyExists, apierrors.IsConflict, apierrors.IsInvalid, apierrors.IsNotFound,
		apierrors.IsForbidden, apierrors.IsUnauthorized, apierrors.IsBadRequest, apierrors.IsTooManyRequests,
		apierrors.IsMethodNotSupported, apierrors.IsRequestEntityTooLargeError,
	}
	for _, is := range refused {
		if is(err) {
			return false
		}
	}
	return true
}

// refused answers a write the API server judged Invalid (its admission webhooks or schema)
// as a Conflict with the server's reason: the doors check every field before a use case
// writes, so such a refusal is the request meeting the stored state (a site being deleted, an MPAN another
// site claims, seen by admission a moment before this request's reads), not a server failure.
func refused(err error) error {
	if !apierrors.IsInvalid(err) {
		return err
	}
	var status apierrors.APIStatus
	msg := err.Error()
	if errors.As(err, &status) {
		msg = status.Status().Message
	}
	return Fail(Conflict, "The change was refused: %s", msg)
}

// create writes a new object; losing a race to create it is errRetry.
func (s *Service) create(ctx context.Context, log *writeLog, obj client.Object) error {
	if err := s.Client.Create(ctx, obj); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return errRetry
		}
		if mayHaveApplied(err) {
			log.created = append(log.created, obj)
		}
		return refused(err)
	}
	log.created = append(log.created, obj)
	log.createdKeys[key(obj)] = true
	log.written = append(log.written, obj)
	return nil
}

// update writes what the request changed (before to obj) as a merge patch with optimistic
// concurrency; a stale read is errRetry. Never the object whole: what the cache leaves out of
// its copies (a Site's spent in-flight marker, index.CacheOptions) stays as stored.
func (s *Service) update(ctx context.Context, log *writeLog, obj, before client.Object) error {
	if err := s.Client.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return errRetry
		}
		if mayHaveApplied(err) {
			log.updated = append(log.updated, before)
		}
		return refused(err)
	}
	log.updated = append(log.updated, before)
	log.written = append(log.written, obj)
	return nil
}

// writeUpsert plans req against what st holds, lets check refuse (or adjust) the plan before
// anything is written, marks a site it creates as in flight (naming the enrolments the caller
// writes after it), and writes the site and assets.
func (s *Service) writeUpsert(ctx context.Context, st store, log *writeLog, ns string, req upsertRequest,
	rules eligibility.Rules, check func(*upsertPlan) error, enrolments ...flexv1.PropositionName) (*upsertPlan, error) {
	plan, err := planUpsert(ctx, st, ns, req, rules)
	if err != nil {
		return nil, err
	}
	if check != nil {
		if err := check(plan); err != nil {
			return nil, err
		}
	}
	plan.markInFlight(s.inFlightDeadline(), enrolments...)
	return plan, s.applyUpsert(ctx, log, plan)
}

// applyUpsert writes the plan: the site first (assets name it), then the assets, each written
// with the site as its controller (the UID of a new site is in its create's answer). A new site
// meets any claim of its MPAN as householdstore.Unclaimed says, or claims the MPAN first when it
// cannot hold it by its name.
func (s *Service) applyUpsert(ctx context.Context, log *writeLog, plan *upsertPlan) error {
	if plan.siteBefore == nil {
		if err := s.createSite(ctx, log, plan.site, plan.claim); err != nil {
			return err
		}
	} else {
		if plan.claim {
			created, err := householdstore.ClaimMPAN(ctx, s.Client, s.APIReader, s.store(true).lookup, plan.siteBefore,
				plan.site.Spec.MPAN, time.Now())
			log.adoptClaim(created, err)
			if err != nil {
				return mpanTaken(err, meters.OrganisationViewer) // upserts are the organisation's alone
			}
		}
		if err := s.write(ctx, log, plan.site, plan.siteBefore, plan.siteFields); err != nil {
			return err
		}
	}
	for _, ap := range plan.assets {
		// An asset the request updates anyway takes its controller in the same write.
		household.ControlledBy(ap.asset, plan.site)
		var before client.Object
		if ap.before != nil {
			before = ap.before
		}
		if err := s.write(ctx, log, ap.asset, before, ap.fields); err != nil {
			return err
		}
	}
	return nil
}

// createSite creates a new site that holds its MPAN by its name (claim false) or by a claim.
// A site created under its MPAN's name that then finds the MPAN claimed by another site is
// deleted at once, before anything names it: the claimant won (householdstore.Unclaimed).
func (s *Service) createSite(ctx context.Context, log *writeLog, site *flexv1.Site, claim bool) error {
	if claim {
		created, err := householdstore.ClaimMPAN(ctx, s.Client, s.APIReader, s.store(true).lookup, site, site.Spec.MPAN, time.Now())
		log.adoptClaim(created, err)
		if err != nil {
			return mpanTaken(err, meters.OrganisationViewer) // sites are created by the organisation alone
		}
		return s.create(ctx, log, site)
	}
	if err := s.create(ctx, log, site); err != nil {
		return err
	}
	err := householdstore.Unclaimed(ctx, s.APIReader, site, time.Now())
	var taken *household.MPANTakenError
	if !errors.As(err, &taken) {
		return err
	}
	if err := s.Client.Delete(ctx, site); client.IgnoreNotFound(err) != nil {
		return err
	}
	// Plan again: the claimant holds the MPAN now (find it by its MPAN), or will soon, or
	// backs off (it saw this site too).
	return &retry{answer: mpanTaken(err, meters.OrganisationViewer)}
}

// retry is errRetry with the answer to give when the retries run out.
type retry struct{ answer error }

func (r *retry) Error() string        { return r.answer.Error() }
func (r *retry) Is(target error) bool { return target == errRetry }

// mpanTaken answers a household.MPANTakenError as a Conflict, naming the MPAN as viewer may
// see it (meters.MPANFor: a household is never told another site's MPAN in full); other errors
// pass unchanged.
func mpanTaken(err error, viewer meters.Viewer) error {
	var taken *household.MPANTakenError
	if !errors.As(err, &taken) {
		return err
	}
	mpan := meters.MPANFor(viewer, taken.MPAN)
	if taken.Pending {
		return &Error{Kind: Conflict, Detail: fmt.Sprintf(
			"MPAN %s is being moved to another site of this organisation; retry", mpan), RetryAfter: "1"}
	}
	return Fail(Conflict, "MPAN %s belongs to another site of this organisation", mpan)
}

// write creates obj when before is nil, and otherwise updates it when fields changed (or it
// lacks its id label).
func (s *Service) write(ctx context.Context, log *writeLog, obj, before client.Object, fields []string) error {
	if before == nil {
		return s.create(ctx, log, obj)
	}
	if len(fields) == 0 && before.GetLabels()[flexv1.IDLabel] != "" {
		return nil
	}
	if err := s.update(ctx, log, obj, before); err != nil {
		return err
	}
	log.noteFields(obj, fields)
	return nil
}

// rollback undoes a failed request's writes, newest first: it deletes what it created and
// puts back the spec of what it updated. A site deleted here takes its children with it
// (finalizer). Failures are logged: the cleanup is best effort on top of a failed request.
func (s *Service) rollback(ctx context.Context, log *writeLog) {
	ctx = context.WithoutCancel(ctx)
	for i := len(log.created) - 1; i >= 0; i-- {
		obj := log.created[i]
		if _, isEnrolment := obj.(*flexv1.Enrolment); isEnrolment {
			// Undoing an enrolment is not the household withdrawing: tell its finalizer.
			patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"rollback"}}}`, flexv1.NoWithdrawalAnnotation)
			if err := s.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch))); client.IgnoreNotFound(err) != nil {
				s.Log.Error(err, "rollback: marking", "object", key(obj))
			}
		}
		if err := s.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			s.Log.Error(err, "rollback: deleting", "object", key(obj))
		}
	}
	for i := len(log.updated) - 1; i >= 0; i-- {
		if err := s.restore(ctx, log.updated[i]); err != nil {
			s.Log.Error(err, "rollback: restoring", "object", key(log.updated[i]))
		}
	}
}

// restore puts an object's stored spec and labels back as they were before the request.
func (s *Service) restore(ctx context.Context, before client.Object) error {
	return kretry.RetryOnConflict(kretry.DefaultRetry, func() error {
		current := before.DeepCopyObject().(client.Object)
		if err := s.APIReader.Get(ctx, client.ObjectKeyFromObject(before), current); err != nil {
			return client.IgnoreNotFound(err)
		}
		restored := before.DeepCopyObject().(client.Object)
		restored.SetResourceVersion(current.GetResourceVersion())
		restored.SetFinalizers(current.GetFinalizers())
		restored.SetAnnotations(current.GetAnnotations())
		return s.Client.Update(ctx, restored)
	})
}

// transact runs plan-and-write until it stops losing races (untilWon): attempt sees a cached
// store first and a fresh one after a lost race. What earlier attempts wrote stays (the next
// attempt reads it as stored) and stays in the log, so that on failure (a refusal, the
// attempts running out, the request's context ending) every write of every attempt is undone.
func (s *Service) transact(ctx context.Context, attempt func(st store, log *writeLog) error) error {
	log := newWriteLog()
	err := untilWon(ctx, func(fresh bool) error { return attempt(s.store(fresh), log) })
	if err != nil {
		s.rollback(ctx, log)
		return err
	}
	s.awaitCache(ctx, log.written, nil)
	return nil
}

// lostRaceBackoff spaces the attempts of a request that keeps losing write races: 10 ms
// doubling, maxAttempts in all (about 300 ms of waiting, time enough for what it waits on: a
// cache to catch up, a deletion to finish). The jitter keeps two requests that lost to each
// other from trying again in step.
var lostRaceBackoff = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: maxAttempts}

// untilWon runs attempt (fresh: an earlier attempt lost a race) until it answers anything but
// errRetry, and answers that. Attempts that keep losing end, after maxAttempts, in the last
// one's answer (a *retry carries it) or ErrTooManyChanges. The waits between attempts honour
// ctx: a request whose client has gone stops at once with ctx's error, without another attempt.
func untilWon(ctx context.Context, attempt func(fresh bool) error) error {
	var last error
	tries := 0
	err := wait.ExponentialBackoffWithContext(ctx, lostRaceBackoff, func(context.Context) (bool, error) {
		last = attempt(tries > 0)
		tries++
		return !errors.Is(last, errRetry), nil
	})
	switch {
	case err == nil:
		return last
	case ctx.Err() != nil:
		return err
	}
	if lost := (*retry)(nil); errors.As(last, &lost) {
		return lost.answer
	}
	return ErrTooManyChanges
}

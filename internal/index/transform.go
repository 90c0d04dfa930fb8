package index

import (
	"strings"
	"sync"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
)

// compactForCache is the cache's transform: it drops managedFields (nothing reads them from
// the cache) and makes the texts that thousands of objects repeat (namespaces, finalizers,
// condition types, reasons and the Site's condition messages, proposition names and
// eligibility issues, asset types and models, enrolment phases) share one copy each instead
// of one allocation per object. Texts that are unique to an object (names, ids, addresses)
// are left alone: interning them would cost more than it saves.
//
// Objects in the cache are read-only (readers get deep copies, or promise not to change
// them), so sharing their strings and the issue lists is safe.
func compactForCache(obj any) (any, error) {
	obj, err := cache.TransformStripManagedFields()(obj)
	if err != nil {
		return obj, err
	}
	if m, ok := obj.(metav1.Object); ok {
		m.SetNamespace(intern(m.GetNamespace()))
		if fs := m.GetFinalizers(); len(fs) > 0 {
			for i := range fs {
				fs[i] = intern(fs[i])
			}
		}
		internOwners(m.GetOwnerReferences())
	}
	switch o := obj.(type) {
	case *flexv1.Site:
		withoutSpentMarker(o)
		internConditions(o.Status.Conditions, true)
		o.Status.EligiblePropositions = internList(&propositionLists, o.Status.EligiblePropositions,
			func(p flexv1.PropositionName) string { return string(p) },
			func(p flexv1.PropositionName) flexv1.PropositionName {
				return flexv1.PropositionName(intern(string(p)))
			})
		for i := range o.Status.Assets {
			o.Status.Assets[i].Propositions = internList(&verdictLists, o.Status.Assets[i].Propositions, verdictKey,
				func(p flexv1.PropositionEligibility) flexv1.PropositionEligibility {
					p.Proposition = flexv1.PropositionName(intern(string(p.Proposition)))
					p.Issues = internIssues(p.Issues)
					return p
				})
		}
	case *flexv1.Asset:
		o.Spec.Type = flexv1.AssetType(intern(string(o.Spec.Type)))
		o.Spec.Model = intern(o.Spec.Model)
		internConditions(o.Status.Conditions, false)
	case *flexv1.Enrolment:
		o.Spec.Proposition = flexv1.PropositionName(intern(string(o.Spec.Proposition)))
		o.Status.Phase = flexv1.EnrolmentPhase(intern(string(o.Status.Phase)))
		internConditions(o.Status.Conditions, false)
	}
	return obj, nil
}

// withoutTransactions is compactForCache of a RewardLedger, less what no reader of the cache
// needs: the transactions, the spec's (the inbox) and the summary's latest ten, and the
// summary's condition, count and last credit (the controller reads a ledger whole from the API
// server; the history is the database's). What stays: the site, the generations, the
// balance, earnings, first reward and history revision (GET /rewards/{site_id}/info) and the
// outbox of events (internal/delivery).
func withoutTransactions(obj any) (any, error) {
	if l, ok := obj.(*flexv1.RewardLedger); ok {
		l.Spec.Transactions = nil
		l.Status.RecentTransactions = nil
		l.Status.Conditions = nil
		l.Status.LastCredited, l.Status.TransactionCount, l.Status.LastCreditedID = nil, nil, ""
	}
	return compactForCache(obj)
}

// withoutSpentMarker drops a Site's in-flight marker (household.InFlight) from the cached copy
// once it is spent (household.MarkerSpent: the Site controller has evaluated the site): from
// then on it binds nothing (household.MarkerOf ignores it), and it is most of a fleet's Sites'
// metadata (~0.5 KB a site). The stored Site keeps it: nothing writes a Site back whole (the
// REST API's update writes a merge patch of what the request changed, app.Service.update;
// the controllers patch their metadata and status), so the marker's absence here is never
// written.
func withoutSpentMarker(site *flexv1.Site) {
	if !household.MarkerSpent(site) {
		return
	}
	if _, ok := site.Annotations[flexv1.InFlightAnnotation]; !ok {
		return
	}
	if len(site.Annotations) == 1 {
		site.Annotations = nil
		return
	}
	delete(site.Annotations, flexv1.InFlightAnnotation)
}

// internOwners shares an owner reference's API version and kind (every child of a Site names
// the same two) and points its flags at one true and one false. The values stay the same, so
// a cached object written back whole writes them unchanged.
func internOwners(refs []metav1.OwnerReference) {
	for i := range refs {
		r := &refs[i]
		r.APIVersion, r.Kind = intern(r.APIVersion), intern(r.Kind)
		r.Controller, r.BlockOwnerDeletion = sharedFlag(r.Controller), sharedFlag(r.BlockOwnerDeletion)
	}
}

// flagTrue and flagFalse are the flags every cached owner reference points to.
var flagTrue, flagFalse = true, false

// sharedFlag is b as a pointer to flagTrue or flagFalse (nil stays nil).
func sharedFlag(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &flagTrue
	default:
		return &flagFalse
	}
}

// internConditions shares a condition's type, status and reason; its message too when
// withMessage (a Site's messages come from a handful of texts; others name the object).
func internConditions(cs []metav1.Condition, withMessage bool) {
	for i := range cs {
		c := &cs[i]
		c.Type, c.Reason = intern(c.Type), intern(c.Reason)
		c.Status = metav1.ConditionStatus(intern(string(c.Status)))
		if withMessage {
			c.Message = intern(c.Message)
		}
	}
}

// intern returns the canonical copy of s (unique.Make: shared while anything uses it).
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// The lists that most objects of a fleet repeat, each kept once and shared by every object
// with the same list: eligibility issues (a small enumeration, at most 8 to a list), a site's
// eligible propositions, and an asset's verdicts per proposition (in a fleet, assets of a
// kind mostly share their verdicts). Few distinct lists exist, so they are kept for good.
var issueLists, propositionLists, verdictLists sync.Map // key -> []T

func internIssues(issues []flexv1.EligibilityIssue) []flexv1.EligibilityIssue {
	return internList(&issueLists, issues, func(is flexv1.EligibilityIssue) string { return string(is) },
		func(is flexv1.EligibilityIssue) flexv1.EligibilityIssue {
			return flexv1.EligibilityIssue(intern(string(is)))
		})
}

// verdictKey is a proposition verdict as a key: the proposition, whether eligible, the issues.
func verdictKey(p flexv1.PropositionEligibility) string {
	var key strings.Builder
	key.WriteString(string(p.Proposition))
	if p.Eligible {
		key.WriteString("\x01")
	}
	for _, is := range p.Issues {
		key.WriteByte(1)
		key.WriteString(string(is))
	}
	return key.String()
}

// internList returns the shared copy of list (its items made canonical by share), found in
// lists by the items' keys.
func internList[T any](lists *sync.Map, list []T, keyOf func(T) string, share func(T) T) []T {
	if len(list) == 0 {
		return list
	}
	var key strings.Builder
	for _, item := range list {
		key.WriteString(keyOf(item))
		key.WriteByte(0)
	}
	if shared, ok := lists.Load(key.String()); ok {
		return shared.([]T)
	}
	kept := make([]T, len(list))
	for i, item := range list {
		kept[i] = share(item)
	}
	shared, _ := lists.LoadOrStore(key.String(), kept)
	return shared.([]T)
}

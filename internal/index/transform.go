package index

import (
	"strings"
	"sync"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
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
	}
	switch o := obj.(type) {
	case *flexv1.Site:
		internConditions(o.Status.Conditions, true)
		for i := range o.Status.EligiblePropositions {
			o.Status.EligiblePropositions[i] = flexv1.PropositionName(intern(string(o.Status.EligiblePropositions[i])))
		}
		for i := range o.Status.Assets {
			props := o.Status.Assets[i].Propositions
			for j := range props {
				props[j].Proposition = flexv1.PropositionName(intern(string(props[j].Proposition)))
				props[j].Issues = internIssues(props[j].Issues)
			}
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

// feedThenStrip hands a RewardLedger to feeds, then is withoutTransactions.
func feedThenStrip(feeds []func(*flexv1.RewardLedger)) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		if l, ok := obj.(*flexv1.RewardLedger); ok {
			for _, feed := range feeds {
				feed(l)
			}
		}
		return withoutTransactions(obj)
	}
}

// withoutTransactions is compactForCache of a RewardLedger, less its transactions: the spec's
// (the inbox) and the status summary's latest ten (the controller reads a ledger whole from the
// API server; the history is the database's).
func withoutTransactions(obj any) (any, error) {
	if l, ok := obj.(*flexv1.RewardLedger); ok {
		l.Spec.Transactions = nil
		l.Status.RecentTransactions = nil
	}
	return compactForCache(obj)
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

// issueLists are the lists of eligibility issues seen, shared by every asset with the same
// list. The issues are a small enumeration and a list holds at most 8, so there are few.
var issueLists sync.Map // string -> []flexv1.EligibilityIssue

func internIssues(issues []flexv1.EligibilityIssue) []flexv1.EligibilityIssue {
	if len(issues) == 0 {
		return issues
	}
	var key strings.Builder
	for _, is := range issues {
		key.WriteString(string(is))
		key.WriteByte(0)
	}
	if shared, ok := issueLists.Load(key.String()); ok {
		return shared.([]flexv1.EligibilityIssue)
	}
	list := make([]flexv1.EligibilityIssue, len(issues))
	for i, is := range issues {
		list[i] = flexv1.EligibilityIssue(intern(string(is)))
	}
	shared, _ := issueLists.LoadOrStore(key.String(), list)
	return shared.([]flexv1.EligibilityIssue)
}

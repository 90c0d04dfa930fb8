package controllers_test

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/validation"
)

// flexEventRuleCases is the one table both homes of a flex event's rules are fed: the Go rule
// (validation.CheckFlexEvent, with the rate read as admission reads it), which the REST API's
// use case, the admission webhook and settlement apply, and its declarative twin, the CRD's
// schema and CEL rules, which the API server applies without any webhook. The bound on how far
// back an event may start needs a clock, which CEL has not: it is the Go rule's alone
// (internal/validation's tests).
var flexEventRuleCases = []struct {
	name   string
	mutate func(*flexv1.FlexEventSpec)
	ok     bool
}{
	{"an hour's event", func(*flexv1.FlexEventSpec) {}, true},
	{"a start off the half-hour", func(s *flexv1.FlexEventSpec) { s.StartAt = ruleAt(17, 15, 0) }, false},
	{"a start with seconds", func(s *flexv1.FlexEventSpec) { s.StartAt = ruleAt(17, 30, 1) }, false},
	{"an end off the half-hour", func(s *flexv1.FlexEventSpec) { s.EndAt = ruleAt(18, 45, 0) }, false},
	{"an end before the start", func(s *flexv1.FlexEventSpec) { s.EndAt = ruleAt(17, 0, 0) }, false},
	{"an end at the start", func(s *flexv1.FlexEventSpec) { s.EndAt = s.StartAt }, false},
	{"half an hour", func(s *flexv1.FlexEventSpec) { s.EndAt = ruleAt(18, 0, 0) }, true},
	{"exactly a day", func(s *flexv1.FlexEventSpec) { s.EndAt = metav1.NewTime(s.StartAt.Add(24 * time.Hour)) }, true},
	{"a day and half an hour", func(s *flexv1.FlexEventSpec) { s.EndAt = metav1.NewTime(s.StartAt.Add(24*time.Hour + 30*time.Minute)) }, false},
	{"a summer evening, UK local time", func(s *flexv1.FlexEventSpec) {
		start := time.Date(2026, 7, 13, 17, 30, 0, 0, settlement.London)
		s.StartAt, s.EndAt = metav1.NewTime(start), metav1.NewTime(start.Add(time.Hour))
	}, true},
	{"turning up", func(s *flexv1.FlexEventSpec) { s.Direction = flexv1.FlexTurnUp }, true},
	{"an unknown direction", func(s *flexv1.FlexEventSpec) { s.Direction = "sideways" }, false},
	{"no direction", func(s *flexv1.FlexEventSpec) { s.Direction = "" }, false},
	{"a zero rate", func(s *flexv1.FlexEventSpec) { s.RatePencePerKWh = "0" }, true},
	{"the highest rate", func(s *flexv1.FlexEventSpec) { s.RatePencePerKWh = "999999.99" }, true},
	{"a rate above the highest", func(s *flexv1.FlexEventSpec) { s.RatePencePerKWh = "1000000" }, false},
	{"a negative rate", func(s *flexv1.FlexEventSpec) { s.RatePencePerKWh = "-1" }, false},
	{"a rate with 3 decimals", func(s *flexv1.FlexEventSpec) { s.RatePencePerKWh = "25.555" }, false},
	{"no rate", func(s *flexv1.FlexEventSpec) { s.RatePencePerKWh = "" }, false},
	{"a deadline at the end", func(s *flexv1.FlexEventSpec) { s.Deadline = &metav1.Time{Time: s.EndAt.Time} }, true},
	{"a deadline before the end", func(s *flexv1.FlexEventSpec) { s.Deadline = &metav1.Time{Time: s.EndAt.Add(-time.Hour)} }, false},
}

// flexEventMarketCases are the CRD's bounds on spec.market (the REST API reads the same bound
// from the CRD: validation.CRDMaxLength).
var flexEventMarketCases = []struct {
	market string
	ok     bool
}{{"uk_flex_market", true}, {strings.Repeat("m", 64), true}, {strings.Repeat("m", 65), false}}

func ruleAt(h, m, s int) metav1.Time {
	return metav1.NewTime(time.Date(2026, 1, 13, h, m, s, 0, time.UTC))
}

func ruleCaseSpec(mutate func(*flexv1.FlexEventSpec)) flexv1.FlexEventSpec {
	s := flexv1.FlexEventSpec{Proposition: flexv1.PropositionLimitedPause, StartAt: ruleAt(17, 30, 0), EndAt: ruleAt(18, 30, 0),
		Direction: flexv1.FlexTurnDown, RatePencePerKWh: "25"}
	mutate(&s)
	return s
}

// goRuleAccepts is the Go rule's verdict on a spec, as the admission webhook reaches it.
func goRuleAccepts(s flexv1.FlexEventSpec) bool {
	rate, err := validation.ParseFlexRate(s.RatePencePerKWh)
	if err != nil {
		return false
	}
	e := validation.FlexEvent{Start: s.StartAt.Time, End: s.EndAt.Time, Direction: string(s.Direction), RateCentipence: rate}
	if s.Deadline != nil {
		e.Deadline = s.Deadline.Time
	}
	return len(validation.CheckFlexEvent(e)) == 0
}

var _ = Describe("A flex event's rules", func() {
	It("are the same in Go and in the CRD's CEL rules, row by row of one table", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		for _, c := range flexEventRuleCases {
			spec := ruleCaseSpec(c.mutate)
			Expect(goRuleAccepts(spec)).To(Equal(c.ok), "%s: validation.CheckFlexEvent", c.name)
			err := k8sClient.Create(ctx, &flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "rule-"}, Spec: spec},
				client.DryRunAll)
			if c.ok {
				Expect(err).NotTo(HaveOccurred(), "%s: the API server", c.name)
			} else {
				Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: the API server answered %v, want Invalid", c.name, err)
			}
		}
	})

	It("bound the market, and keep it as declared", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		for _, c := range flexEventMarketCases {
			spec := ruleCaseSpec(func(s *flexv1.FlexEventSpec) { s.Market = c.market })
			err := k8sClient.Create(ctx, &flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "market-"}, Spec: spec},
				client.DryRunAll)
			Expect(err == nil).To(Equal(c.ok), "market of %d characters: %v", len(c.market), err)
		}
		for _, change := range []struct{ from, to string }{{"", "uk_flex_market"}, {"uk_flex_market", "other"}, {"uk_flex_market", ""}} {
			ev := &flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "market-"},
				Spec: ruleCaseSpec(func(s *flexv1.FlexEventSpec) { s.Market = change.from })}
			Expect(k8sClient.Create(ctx, ev)).To(Succeed())
			// The FlexEvent controller writes the new event at once (its finalizer, its
			// status): an update from the copy created may conflict, so each try starts from
			// the object as it is now, until the API server judges the change itself.
			Eventually(func(g Gomega) {
				fresh := &flexv1.FlexEvent{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ev), fresh)).To(Succeed())
				fresh.Spec.Market = change.to
				err := k8sClient.Update(ctx, fresh)
				g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "market %q → %q: %v, want Invalid", change.from, change.to, err)
				g.Expect(err.Error()).To(ContainSubstring("market is immutable"))
			}).Should(Succeed())
		}
	})
})

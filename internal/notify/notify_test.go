package notify_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/notify"
)

const (
	lp = flexv1.PropositionLimitedPause
	pc = flexv1.PropositionPriceCurve
)

func evaluated(props []flexv1.PropositionName, assets ...flexv1.AssetEligibility) *flexv1.Site {
	s := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 1, Labels: map[string]string{flexv1.IDLabel: "site-1"}}}
	s.Status.ObservedGeneration = 1
	s.Status.EligiblePropositions = props
	s.Status.Assets = assets
	return s
}

func assetResult(name string, eligible bool, issues ...flexv1.EligibilityIssue) flexv1.AssetEligibility {
	return flexv1.AssetEligibility{Name: name, ID: "id-" + name, ExternalID: "ext-" + name,
		Propositions: []flexv1.PropositionEligibility{{Proposition: lp, Eligible: eligible, Issues: issues}}}
}

func types(cs []notify.Change) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		t := string(c.Type)
		if d, ok := c.Data.(notify.AssetData); ok {
			t += ":" + string(d.Change)
		}
		out = append(out, t)
	}
	return out
}

func TestSiteEvents(t *testing.T) {
	never := evaluated(nil)
	never.Status.ObservedGeneration = -1
	a := assetResult("a", true)
	aNot := assetResult("a", false, flexv1.IssueAssetModelNotSet)
	b := assetResult("b", false, flexv1.IssueAssetModelNotSet)
	bOther := assetResult("b", false, flexv1.IssueAssetModelNotFound)
	cases := []struct {
		name          string
		before, after *flexv1.Site
		want          []string
	}{
		{"no-op", evaluated([]flexv1.PropositionName{lp}, a), evaluated([]flexv1.PropositionName{lp}, a), nil},
		{"first evaluation, nothing", never, evaluated(nil), nil},
		{"first evaluation, eligible", never, evaluated([]flexv1.PropositionName{lp}, a), []string{"site.eligibility_changed"}},
		{"propositions change", evaluated([]flexv1.PropositionName{lp}, a), evaluated([]flexv1.PropositionName{lp, pc}, a), []string{"site.eligibility_changed"}},
		{"asset result changes", evaluated([]flexv1.PropositionName{lp}, a, b), evaluated([]flexv1.PropositionName{lp}, a, bOther), []string{"site.eligibility_changed"}},
		{"asset becomes ineligible", evaluated([]flexv1.PropositionName{lp}, a), evaluated(nil, aNot), []string{"site.eligibility_changed"}},
		{"asset deleted", evaluated([]flexv1.PropositionName{lp}, a, b), evaluated([]flexv1.PropositionName{lp}, a), []string{"site.eligibility_changed", "asset.changed:deleted"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := types(notify.SiteEvents(c.before, c.after))
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	t.Run("data", func(t *testing.T) {
		cs := notify.SiteEvents(evaluated([]flexv1.PropositionName{lp}, a), evaluated(nil, aNot))
		ev := notify.Stamp(cs[0], time.Unix(100, 0))
		var data map[string]any
		if err := json.Unmarshal([]byte(ev.Data), &data); err != nil {
			t.Fatal(err)
		}
		if data["site_id"] != "site-1" || fmt.Sprint(data["previous_eligible_propositions"]) != "[limited_pause]" {
			t.Fatalf("data %v", data)
		}
		elig := data["eligibility"].(map[string]any)
		if fmt.Sprint(elig["eligible_propositions"]) != "[]" || len(elig["assets"].([]any)) != 1 {
			t.Fatalf("eligibility %v", elig)
		}
	})
}

func TestAssetEvents(t *testing.T) {
	mk := func(observed, gen int64, reauth bool) *flexv1.Asset {
		a := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Name: "a", Generation: gen}}
		a.Status.ObservedGeneration, a.Status.NeedsReauthorisation = observed, reauth
		return a
	}
	cases := []struct {
		name          string
		before, after *flexv1.Asset
		want          []string
	}{
		{"created", mk(-1, 1, false), mk(1, 1, false), []string{"asset.changed:created"}},
		{"not observed", mk(-1, 1, false), mk(-1, 1, false), nil},
		{"updated", mk(1, 2, false), mk(2, 2, false), []string{"asset.changed:updated"}},
		{"reauthorisation flipped", mk(2, 2, false), mk(2, 2, true), []string{"asset.changed:updated"}},
		{"no-op", mk(2, 2, false), mk(2, 2, false), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := types(notify.AssetEvents(c.before, c.after, "site-1")); fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestEnrolmentEvents(t *testing.T) {
	mk := func(p flexv1.EnrolmentPhase) *flexv1.Enrolment {
		e := &flexv1.Enrolment{Spec: flexv1.EnrolmentSpec{SiteName: "s", Proposition: lp}}
		e.Status.Phase = p
		return e
	}
	cases := []struct {
		before, after flexv1.EnrolmentPhase
		want          string
	}{
		{"", flexv1.EnrolmentPending, ""},
		{flexv1.EnrolmentPending, flexv1.EnrolmentActive, "active"},
		{flexv1.EnrolmentActive, flexv1.EnrolmentActive, ""},
		{flexv1.EnrolmentActive, flexv1.EnrolmentNotEligible, "not_eligible"},
		{"", flexv1.EnrolmentWithdrawn, "withdrawn"},
	}
	for _, c := range cases {
		cs := notify.EnrolmentEvents(mk(c.before), mk(c.after), "site-1")
		got := ""
		if len(cs) == 1 {
			got = string(cs[0].Data.(notify.EnrolmentData).Status)
		}
		if got != c.want || len(cs) > 1 {
			t.Errorf("%s -> %s: got %q (%d events), want %q", c.before, c.after, got, len(cs), c.want)
		}
	}
	if d := notify.EnrolmentRemovedChange(mk(flexv1.EnrolmentActive), "site-1").Data.(notify.EnrolmentData); d.Status != "removed" || d.Issues == nil {
		t.Errorf("removed: %+v", d)
	}
}

func sub(name string, paused bool, events ...flexv1.EventType) flexv1.Subscription {
	return flexv1.Subscription{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flexv1.SubscriptionSpec{Events: events, Paused: paused}}
}

func TestRecordOnlyWhatIsWanted(t *testing.T) {
	change := notify.Change{Type: flexv1.EventAssetChanged, SiteID: "s", Data: map[string]string{}}
	cases := []struct {
		name string
		subs []flexv1.Subscription
		want int
	}{
		{"no subscription", nil, 0},
		{"paused", []flexv1.Subscription{sub("a", true)}, 0},
		{"other types", []flexv1.Subscription{sub("a", false, flexv1.EventSiteOffboarded)}, 0},
		{"all types", []flexv1.Subscription{sub("a", false)}, 1},
		{"named", []flexv1.Subscription{sub("a", false, flexv1.EventAssetChanged)}, 1},
	}
	for _, c := range cases {
		out, _ := notify.Record(nil, []notify.Change{change}, c.subs, time.Now(), 0)
		if len(out) != c.want {
			t.Errorf("%s: %d events, want %d", c.name, len(out), c.want)
		}
	}
}

func eligibilityEvent(site string, n int, prev string) flexv1.PendingEvent {
	return flexv1.PendingEvent{ID: fmt.Sprintf("%s-%d", site, n), Type: flexv1.EventSiteEligibilityChanged, SiteID: site,
		Data: fmt.Sprintf(`{"site_id":%q,"n":%d,"previous_eligible_propositions":[%q]}`, site, n, prev)}
}

func TestBoundCoalescesEligibilityThenDrops(t *testing.T) {
	outbox := make([]flexv1.PendingEvent, 0, 5)
	for i := range 4 {
		outbox = append(outbox, eligibilityEvent("s1", i, fmt.Sprint("p", i)))
	}
	outbox = append(outbox, flexv1.PendingEvent{ID: "asset", Type: flexv1.EventAssetChanged, SiteID: "s1", Data: "{}"})
	out, dropped := notify.Bound(outbox, 3)
	if dropped != 0 || len(out) != 3 {
		t.Fatalf("got %d events, %d dropped", len(out), dropped)
	}
	// The two oldest eligibility events coalesced into the next one, which keeps the oldest
	// removed one's previous propositions; the latest is untouched.
	if out[0].ID != "s1-2" || out[1].ID != "s1-3" || out[2].ID != "asset" {
		t.Fatalf("kept %v %v %v", out[0].ID, out[1].ID, out[2].ID)
	}
	if want := `"previous_eligible_propositions":["p0"]`; !strings.Contains(out[0].Data, want) {
		t.Fatalf("coalesced data %s lacks %s", out[0].Data, want)
	}
	if want := `"previous_eligible_propositions":["p3"]`; !strings.Contains(out[1].Data, want) {
		t.Fatalf("latest data %s lacks %s", out[1].Data, want)
	}

	assets := make([]flexv1.PendingEvent, 0, 5)
	for i := range 5 {
		assets = append(assets, flexv1.PendingEvent{ID: fmt.Sprint(i), Type: flexv1.EventAssetChanged, Data: "{}"})
	}
	out, dropped = notify.Bound(assets, 3)
	if dropped != 2 || out[0].ID != "2" {
		t.Fatalf("dropped %d, first %s", dropped, out[0].ID)
	}
	if out, dropped = notify.Bound(assets, 0); dropped != 0 || len(out) != 5 {
		t.Fatal("within the default limit nothing goes")
	}
}

func TestSettle(t *testing.T) {
	subs := []flexv1.Subscription{sub("a", false), sub("b", false, flexv1.EventAssetChanged)}
	outbox := []flexv1.PendingEvent{
		{ID: "1", Type: flexv1.EventAssetChanged},
		{ID: "2", Type: flexv1.EventSiteOffboarded},
	}
	out, changed := notify.Settle(outbox, "1", "a", subs)
	if !changed || len(out) != 2 || fmt.Sprint(out[0].DoneFor) != "[a]" {
		t.Fatalf("after a: %+v", out)
	}
	out, _ = notify.Settle(out, "1", "b", subs)
	if len(out) != 1 || out[0].ID != "2" {
		t.Fatalf("after b: %+v", out)
	}
	out, _ = notify.Settle(out, "2", "a", subs)
	if len(out) != 0 {
		t.Fatalf("offboarded owed to a only: %+v", out)
	}
	if got := notify.Owed(&outbox[0], []flexv1.Subscription{sub("a", true)}); got != nil {
		t.Fatalf("a paused subscription is owed nothing: %v", got)
	}
}

func TestSchedule(t *testing.T) {
	s := notify.Schedule{Steps: []time.Duration{5 * time.Second, 30 * time.Second, time.Hour}, Jitter: 0.2, Horizon: 24 * time.Hour}
	for failed, want := range map[int]time.Duration{1: 5 * time.Second, 2: 30 * time.Second, 3: time.Hour, 10: time.Hour} {
		got := s.Delay(failed)
		if got < want*8/10 || got > want*12/10 {
			t.Errorf("after %d failures: %v, want about %v", failed, got, want)
		}
	}
	now := time.Now()
	if s.Expired(now.Add(-23*time.Hour), now) || !s.Expired(now.Add(-24*time.Hour), now) {
		t.Error("horizon")
	}
	// The default schedule retries for at least 24 hours.
	if notify.DefaultSchedule.Horizon < 24*time.Hour {
		t.Error("default horizon below 24 h")
	}
}

func TestAddressPolicy(t *testing.T) {
	deny := notify.AddressPolicy{}
	loopback := notify.AddressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	cases := []struct {
		addr    string
		policy  notify.AddressPolicy
		allowed bool
	}{
		{"127.0.0.1", deny, false},
		{"127.0.0.1", loopback, true},
		{"::1", deny, false},
		{"::1", loopback, true},
		{"::ffff:127.0.0.1", deny, false}, // v4-mapped loopback
		{"10.96.0.1", deny, false},        // a cluster's service range
		{"10.96.0.1", loopback, false},
		{"172.16.5.4", deny, false},
		{"192.168.1.1", deny, false},
		{"169.254.169.254", deny, false}, // cloud metadata
		{"100.64.0.1", deny, false},      // CGNAT
		{"0.0.0.0", deny, false},
		{"::", deny, false},
		{"224.0.0.1", deny, false},
		{"ff02::1", deny, false},
		{"fe80::1", deny, false},
		{"fd00::1", deny, false},
		{"8.8.8.8", deny, true},
		{"2001:4860:4860::8888", deny, true},
		{"93.184.216.34", loopback, true},
	}
	for _, c := range cases {
		err := c.policy.Check(netip.MustParseAddr(c.addr))
		if (err == nil) != c.allowed {
			t.Errorf("%s (allow %v): err %v, want allowed=%v", c.addr, c.policy.Allow, err, c.allowed)
		}
		// The dialer hook decides the same on "host:port" (what net.Dialer passes it after
		// resolving), without connecting anywhere.
		derr := c.policy.Control("tcp", netip.AddrPortFrom(netip.MustParseAddr(c.addr), 443).String(), nil)
		if (derr == nil) != c.allowed {
			t.Errorf("Control(%s): err %v, want allowed=%v", c.addr, derr, c.allowed)
		}
	}
	if _, err := notify.ParseCIDRs([]string{"10.0.0.0/8", "nope"}); err == nil {
		t.Error("a bad CIDR is refused")
	}
}

func TestCreditedTransactions(t *testing.T) {
	ledger := func(last string, ids ...string) *flexv1.RewardLedger {
		l := &flexv1.RewardLedger{}
		l.Status.LastCreditedID = last
		for _, id := range ids {
			l.Spec.Transactions = append(l.Spec.Transactions, flexv1.RewardTransaction{ID: id, CreditPence: 100})
		}
		return l
	}
	ids := func(txs []flexv1.RewardTransaction) string {
		out := ""
		for _, tx := range txs {
			out += tx.ID
		}
		return out
	}
	cases := []struct {
		name      string
		l         *flexv1.RewardLedger
		new, mark string
	}{
		{"empty", ledger(""), "", ""},
		{"first ones", ledger("", "a", "b"), "ab", "b"},
		{"one added", ledger("b", "a", "b", "c"), "c", "c"},
		{"nothing new", ledger("c", "a", "b", "c"), "", "c"},
		{"the mark was removed", ledger("x", "a", "b"), "", "b"},
	}
	for _, c := range cases {
		txs, mark := notify.CreditedTransactions(c.l)
		if ids(txs) != c.new || mark != c.mark {
			t.Errorf("%s: new %q mark %q, want %q %q", c.name, ids(txs), mark, c.new, c.mark)
		}
	}
	cs := notify.LedgerEvents(ledger("", "a").Spec.Transactions, "site-1")
	ev := notify.Stamp(cs[0], time.Now())
	if !strings.Contains(ev.Data, `"site_id":"site-1"`) || !strings.Contains(ev.Data, `"transaction_id":"a"`) ||
		!strings.Contains(ev.Data, `"credit_pence":100`) {
		t.Errorf("data %s", ev.Data)
	}
}

func TestHandOver(t *testing.T) {
	site := []flexv1.PendingEvent{{ID: "s1", Type: flexv1.EventSiteEligibilityChanged}}
	removed := notify.StampAs(notify.EnrolmentRemovedChange(&flexv1.Enrolment{}, "site-1"), notify.RemovalID("uid-1"), time.Now())
	if removed.ID != notify.RemovalID("uid-1") || removed.ID == notify.RemovalID("uid-2") {
		t.Fatal("a removal's id derives from the uid alone")
	}
	handed := []flexv1.PendingEvent{{ID: "e1", Type: flexv1.EventEnrolmentChanged}, removed}
	out, changed, dropped := notify.HandOver(site, handed, 0)
	if !changed || dropped != 0 || len(out) != 3 || out[2].ID != removed.ID {
		t.Fatalf("first hand-over: %v %v %+v", changed, dropped, out)
	}
	// A finalize retried after the hand-over hands the same events over: nothing changes.
	again, changed, _ := notify.HandOver(out, handed, 0)
	if changed || len(again) != 3 {
		t.Fatalf("second hand-over changed the outbox: %+v", again)
	}
}

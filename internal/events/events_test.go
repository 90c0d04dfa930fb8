package events_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/events"
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

func types(cs []events.Change) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		t := string(c.Type)
		if d, ok := c.Data.(events.AssetData); ok {
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
			got := types(events.SiteEvents(c.before, c.after))
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	t.Run("data", func(t *testing.T) {
		cs := events.SiteEvents(evaluated([]flexv1.PropositionName{lp}, a), evaluated(nil, aNot))
		ev := events.Stamp(cs[0], time.Unix(100, 0))
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
			if got := types(events.AssetEvents(c.before, c.after, "site-1")); fmt.Sprint(got) != fmt.Sprint(c.want) {
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
		cs := events.EnrolmentEvents(mk(c.before), mk(c.after), "site-1")
		got := ""
		if len(cs) == 1 {
			got = string(cs[0].Data.(events.EnrolmentData).Status)
		}
		if got != c.want || len(cs) > 1 {
			t.Errorf("%s -> %s: got %q (%d events), want %q", c.before, c.after, got, len(cs), c.want)
		}
	}
	if d := events.EnrolmentRemovedChange(mk(flexv1.EnrolmentActive), "site-1").Data.(events.EnrolmentData); d.Status != "removed" || d.Issues == nil {
		t.Errorf("removed: %+v", d)
	}
}

func sub(name string, paused bool, types ...flexv1.EventType) flexv1.Subscription {
	return flexv1.Subscription{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: flexv1.SubscriptionSpec{Events: types, Paused: paused}}
}

func TestWantedKeepsOnlyWhatASubscriptionWants(t *testing.T) {
	change := events.Change{Type: flexv1.EventAssetChanged, SiteID: "s", Data: map[string]string{}}
	cases := []struct {
		name string
		subs []flexv1.Subscription
		want int
	}{
		{"no subscription", nil, 0},
		{"paused", []flexv1.Subscription{sub("a", true)}, 0},
		{"other types", []flexv1.Subscription{sub("a", false, flexv1.EventSiteOffboarded)}, 0},
		{"all types", []flexv1.Subscription{sub("a", false)}, 1},
		{"named", []flexv1.Subscription{sub("b", false, flexv1.EventAssetChanged)}, 1},
	}
	for _, c := range cases {
		if out := events.Wanted([]events.Change{change}, c.subs); len(out) != c.want {
			t.Errorf("%s: %d events, want %d", c.name, len(out), c.want)
		}
	}
}

// TestDigest: the same changes computed again (a reconcile redone) have the same digest,
// whatever ids and times they would be stamped with; any other change has another.
func TestDigest(t *testing.T) {
	active := events.Change{Type: flexv1.EventEnrolmentChanged, SiteID: "s",
		Data: events.EnrolmentData{SiteID: "s", Status: events.EnrolmentActive}}
	withdrawn := events.Change{Type: flexv1.EventEnrolmentChanged, SiteID: "s",
		Data: events.EnrolmentData{SiteID: "s", Status: events.EnrolmentWithdrawn}}
	cases := []struct {
		name string
		a, b []events.Change
		same bool
	}{
		{"the same changes", []events.Change{active}, []events.Change{active}, true},
		{"other data", []events.Change{active}, []events.Change{withdrawn}, false},
		{"another type, same data", []events.Change{active},
			[]events.Change{{Type: flexv1.EventSiteOffboarded, SiteID: "s", Data: active.Data}}, false},
		{"one more", []events.Change{active}, []events.Change{active, withdrawn}, false},
		{"another order", []events.Change{active, withdrawn}, []events.Change{withdrawn, active}, false},
	}
	for _, c := range cases {
		if got := events.Digest(c.a) == events.Digest(c.b); got != c.same {
			t.Errorf("%s: same digest %v, want %v", c.name, got, c.same)
		}
	}
}

func TestSchedule(t *testing.T) {
	s := events.Schedule{Steps: []time.Duration{5 * time.Second, 30 * time.Second, time.Hour}, Jitter: 0.2, Horizon: 24 * time.Hour}
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
	if events.DefaultSchedule.Horizon < 24*time.Hour {
		t.Error("default horizon below 24 h")
	}
}

func TestAddressPolicy(t *testing.T) {
	deny := events.AddressPolicy{}
	loopback := events.AddressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	cases := []struct {
		addr    string
		policy  events.AddressPolicy
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
	if _, err := events.ParseCIDRs([]string{"10.0.0.0/8", "nope"}); err == nil {
		t.Error("a bad CIDR is refused")
	}
}

func TestRemovalID(t *testing.T) {
	removed := events.StampAs(events.EnrolmentRemovedChange(&flexv1.Enrolment{}, "site-1"), events.RemovalID("uid-1"), time.Now())
	if removed.ID != events.RemovalID("uid-1") || removed.ID == events.RemovalID("uid-2") {
		t.Fatal("a removal's id derives from the uid alone")
	}
	if !strings.Contains(removed.Data, `"status":"removed"`) {
		t.Errorf("data %s", removed.Data)
	}
}

// TestAddressPolicyHostileSpellings: every spelling of an address that is not public is
// refused on the address as dialled, whatever form carries it: a zone id, a documentation
// range, an IPv6 form that carries an IPv4 address (decided on the IPv4 address too, so that
// allowing a translation prefix does not open the metadata service through it). An allowed
// range wins. Nothing connects: the policy and the dialer hook are called directly.
func TestAddressPolicyHostileSpellings(t *testing.T) {
	deny := events.AddressPolicy{}
	allow := func(cidrs ...string) events.AddressPolicy {
		p := events.AddressPolicy{}
		for _, c := range cidrs {
			p.Allow = append(p.Allow, netip.MustParsePrefix(c))
		}
		return p
	}
	loopback := allow("127.0.0.0/8", "::1/128")
	cases := []struct {
		name    string
		addr    string
		policy  events.AddressPolicy
		allowed bool
	}{
		// IPv6 zone ids: decided without the zone, and a zone is never a public destination.
		{"link-local with a zone", "fe80::fc:ff:fe00:1%eth0", deny, false},
		{"link-local with a numeric zone", "fe80::1%2", deny, false},
		{"link-local without a zone", "fe80::fc:ff:fe00:1", deny, false},
		{"loopback with a zone", "::1%lo", deny, false},
		{"unique local with a zone", "fd00::1%eth0", deny, false},
		{"multicast with a zone", "ff02::1%eth0", deny, false},
		{"public with a zone", "2001:4860:4860::8888%eth0", deny, false},
		{"allowed link-local with a zone", "fe80::1%eth0", allow("fe80::/10"), true},
		{"loopback allowed, with a zone", "::1%lo", loopback, true},
		// Documentation ranges.
		{"TEST-NET-1", "192.0.2.1", deny, false},
		{"TEST-NET-2", "198.51.100.7", deny, false},
		{"TEST-NET-3", "203.0.113.9", deny, false},
		{"IPv6 documentation", "2001:db8::1", deny, false},
		{"IPv6 documentation (RFC 9637)", "3fff::1", deny, false},
		{"TEST-NET-1, mapped", "::ffff:192.0.2.1", deny, false},
		// Other special-purpose ranges.
		{"6to4 relay anycast", "192.88.99.1", deny, false},
		{"AS112", "192.175.48.1", deny, false},
		{"benchmarking", "198.18.0.1", deny, false},
		{"IPv6 benchmarking", "2001:2::1", deny, false},
		{"AWS metadata over IPv6", "fd00:ec2::254", deny, false},
		{"Alibaba metadata (CGNAT)", "100.100.100.200", deny, false},
		// NAT64 64:ff9b::/96.
		{"NAT64 of the metadata address", "64:ff9b::a9fe:a9fe", deny, false},
		{"NAT64 of the metadata address, dotted", "64:ff9b::169.254.169.254", deny, false},
		{"NAT64 of loopback", "64:ff9b::7f00:1", loopback, false},
		{"NAT64 allowed, metadata inside", "64:ff9b::a9fe:a9fe", allow("64:ff9b::/96"), false},
		{"NAT64 allowed, private inside", "64:ff9b::a00:1", allow("64:ff9b::/96"), false},
		{"NAT64 allowed, public inside", "64:ff9b::808:808", allow("64:ff9b::/96"), true},
		{"local-use NAT64", "64:ff9b:1::a9fe:a9fe", deny, false},
		// 6to4 2002::/16.
		{"6to4 of the metadata address", "2002:a9fe:a9fe::1", deny, false},
		{"6to4 of a public address", "2002:808:808::1", deny, false},
		{"6to4 allowed, metadata inside", "2002:a9fe:a9fe::1", allow("2002::/16"), false},
		{"6to4 allowed, loopback inside", "2002:7f00:1::1", allow("2002::/16"), false},
		{"6to4 allowed, public inside", "2002:808:808::1", allow("2002::/16"), true},
		// IPv4-compatible ::/96.
		{"IPv4-compatible metadata address", "::a9fe:a9fe", deny, false},
		{"IPv4-compatible, dotted", "::169.254.169.254", deny, false},
		{"IPv4-compatible loopback", "::7f00:1", deny, false},
		{"IPv4-compatible allowed, metadata inside", "::a9fe:a9fe", allow("::/96"), false},
		// IPv4-mapped ::ffff:0:0/96: decided as the IPv4 address.
		{"IPv4-mapped metadata address", "::ffff:a9fe:a9fe", deny, false},
		{"IPv4-mapped metadata, dotted", "::ffff:169.254.169.254", deny, false},
		{"IPv4-mapped private", "::ffff:10.0.0.1", deny, false},
		{"IPv4-mapped public", "::ffff:8.8.8.8", deny, true},
		// IPv4-translated ::ffff:0:0:0/96.
		{"IPv4-translated metadata address", "::ffff:0:a9fe:a9fe", deny, false},
		// Teredo 2001::/32: server 65.54.227.120, client 192.0.2.45 (RFC 4380's example).
		{"Teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2", deny, false},
		{"Teredo prefix", "2001::1", deny, false},
		{"Teredo allowed, metadata client inside", "2001:0:808:808::5601:5601", allow("2001::/32"), false},
		{"Teredo allowed, metadata server inside", "2001:0:a9fe:a9fe::f7f7:f7f7", allow("2001::/32"), false},
		{"Teredo allowed, public inside", "2001:0:808:808::f7f7:f7f7", allow("2001::/32"), true},
		// What stays allowed.
		{"loopback allowed", "::1", loopback, true},
		{"public IPv4", "93.184.216.34", deny, true},
		{"public IPv6", "2606:2800:220:1:248:1893:25c8:1946", deny, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addr := netip.MustParseAddr(c.addr)
			err := c.policy.Check(addr)
			if (err == nil) != c.allowed {
				t.Errorf("Check(%s) (allow %v): err %v, want allowed=%v", c.addr, c.policy.Allow, err, c.allowed)
			}
			if err != nil && !strings.Contains(err.Error(), "refused") {
				t.Errorf("Check(%s): %q does not say refused", c.addr, err)
			}
			// What net.Dialer hands its Control hook after resolving: "[addr%zone]:port".
			hostPort := netip.AddrPortFrom(addr, 18443).String()
			derr := c.policy.Control("tcp6", hostPort, nil)
			if (derr == nil) != c.allowed {
				t.Errorf("Control(%s): err %v, want allowed=%v", hostPort, derr, c.allowed)
			}
		})
	}

	// A link-local address with a zone is refused exactly as without one.
	with := deny.Check(netip.MustParseAddr("fe80::fc:ff:fe00:1%eth0"))
	without := deny.Check(netip.MustParseAddr("fe80::fc:ff:fe00:1"))
	if with == nil || without == nil || with.Error() != without.Error() {
		t.Errorf("zone changes the answer: %v / %v", with, without)
	}
}

// TestEmbeddedIPv4 reads the IPv4 address out of each IPv6 form that carries one.
func TestEmbeddedIPv4(t *testing.T) {
	for addr, want := range map[string][]string{
		"64:ff9b::a9fe:a9fe":                   {"169.254.169.254"},
		"2002:a9fe:a9fe::1":                    {"169.254.169.254"},
		"::a9fe:a9fe":                          {"169.254.169.254"},
		"::ffff:a9fe:a9fe":                     {"169.254.169.254"},
		"::ffff:0:a9fe:a9fe":                   {"169.254.169.254"},
		"2001:0:4136:e378:8000:63bf:3fff:fdd2": {"65.54.227.120", "192.0.2.45"},
		"::1":                                  nil,
		"::":                                   nil,
		"2001:4860:4860::8888":                 nil,
		"fe80::1%eth0":                         nil,
	} {
		embedded := events.EmbeddedIPv4(netip.MustParseAddr(addr))
		var got []string
		if len(embedded) > 0 {
			got = make([]string, 0, len(embedded))
		}
		for _, a := range embedded {
			got = append(got, a.String())
		}
		if !slices.Equal(got, want) {
			t.Errorf("EmbeddedIPv4(%s) = %v, want %v", addr, got, want)
		}
	}
}

// TestCheckURLHost: a subscription URL whose host is an address literal is decided at
// creation as the dialer would decide it (the issue's spellings included); a name is left to
// the dialer.
func TestCheckURLHost(t *testing.T) {
	deny := events.AddressPolicy{}
	loopback := events.AddressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	for _, c := range []struct {
		url     string
		policy  events.AddressPolicy
		allowed bool
	}{
		{"https://[fe80::fc:ff:fe00:1%25eth0]:18443/x", deny, false},
		{"https://[fe80::fc:ff:fe00:1]:18443/x", deny, false},
		{"https://[fe80::1%25eth0]/x", loopback, false},
		{"https://192.0.2.1/x", deny, false},
		{"https://198.51.100.1/x", deny, false},
		{"https://203.0.113.1/x", deny, false},
		{"https://[2001:db8::1]/x", deny, false},
		{"https://[64:ff9b::a9fe:a9fe]/x", deny, false},
		{"https://[2002:a9fe:a9fe::1]/x", deny, false},
		{"https://[::a9fe:a9fe]/x", deny, false},
		{"https://[::ffff:169.254.169.254]/x", deny, false},
		{"https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/x", deny, false},
		{"https://169.254.169.254/latest/meta-data", deny, false},
		{"https://127.0.0.1:8443/x", deny, false},
		{"https://127.0.0.1:8443/x", loopback, true},
		{"https://[::1]:8443/x", loopback, true},
		{"https://8.8.8.8/x", deny, true},
		{"https://receiver.example.com/x", deny, true}, // a name: decided at every delivery
		{"https://localhost/x", deny, true},            // likewise (refused when dialled)
	} {
		err := c.policy.CheckURLHost(c.url)
		if (err == nil) != c.allowed {
			t.Errorf("CheckURLHost(%s) (allow %v): %v, want allowed=%v", c.url, c.policy.Allow, err, c.allowed)
		}
	}
}

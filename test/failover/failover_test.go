package failover_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/identity"
)

// lease reads the leader election Lease.
func lease(ctx context.Context) *coordinationv1.Lease {
	GinkgoHelper()
	l := &coordinationv1.Lease{}
	Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: leaseName}, l)).To(Succeed())
	return l
}

func holder(ctx context.Context) string {
	GinkgoHelper()
	return ptrString(lease(ctx).Spec.HolderIdentity)
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// household is an onboard request for a site with a qualifying charger.
func household(mpan string) map[string]any {
	return map[string]any{
		"site": map[string]any{"mpan": mpan, "postcode": "SW1A 1AA", "gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"},
		"assets": []any{map[string]any{"external_id": "charger-" + mpan, "type": "charger", "asset_model": "zappi",
			"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}}},
		"proposition": "limited_pause",
	}
}

// pendingHousehold declares a site, its charger and its enrolment directly (as kubectl or
// GitOps would): all of their status is the controllers' to compute.
func pendingHousehold(ctx context.Context, ns, mpan string) client.ObjectKey {
	GinkgoHelper()
	siteName := identity.SiteNameForMPAN(mpan)
	consent := metav1.NewTime(time.Date(2026, 1, 15, 10, 30, 0, 0, time.UTC))
	Expect(env.Client.Create(ctx, &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: siteName},
		Spec: flexv1.SiteSpec{MPAN: mpan, Postcode: "M1 1AE", BoundaryMeterConsentAt: &consent}})).To(Succeed())
	power := int64(7400)
	Expect(env.Client.Create(ctx, &flexv1.Asset{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.AssetName("charger-" + mpan)},
		Spec: flexv1.AssetSpec{SiteName: siteName, ExternalID: "charger-" + mpan, Type: flexv1.AssetTypeCharger,
			Model: "zappi", InstallationDate: "2025-06-15", PowerW: &power}})).To(Succeed())
	Expect(env.Client.Create(ctx, &flexv1.Enrolment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.EnrolmentName(siteName, flexv1.PropositionLimitedPause)},
		Spec:       flexv1.EnrolmentSpec{SiteName: siteName, Proposition: flexv1.PropositionLimitedPause}})).To(Succeed())
	return client.ObjectKey{Namespace: ns, Name: siteName}
}

// computed reports whether a site's status reflects its current spec and assets, and its
// enrolment is active.
func computed(ctx context.Context, key client.ObjectKey) error {
	site := &flexv1.Site{}
	if err := env.Client.Get(ctx, key, site); err != nil {
		return err
	}
	ready := meta.FindStatusCondition(site.Status.Conditions, flexv1.ReadyCondition)
	switch {
	case site.Status.ObservedGeneration != site.Generation:
		return fmt.Errorf("site %s: status of generation %d, spec at %d", key, site.Status.ObservedGeneration, site.Generation)
	case ready == nil || ready.Status != metav1.ConditionTrue:
		return fmt.Errorf("site %s: not Ready: %+v", key, ready)
	case !slices.Contains(site.Status.EligiblePropositions, flexv1.PropositionLimitedPause):
		return fmt.Errorf("site %s: eligible for %v", key, site.Status.EligiblePropositions)
	case site.Labels[flexv1.IDLabel] == "":
		return fmt.Errorf("site %s: no id", key)
	}
	e := &flexv1.Enrolment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: key.Namespace,
		Name: identity.EnrolmentName(key.Name, flexv1.PropositionLimitedPause)}, e); err != nil {
		return err
	}
	if e.Status.Phase != flexv1.EnrolmentActive {
		return fmt.Errorf("enrolment of %s: phase %q", key, e.Status.Phase)
	}
	return nil
}

// untouched reports whether no controller has looked at a site yet.
func untouched(ctx context.Context, key client.ObjectKey) error {
	site := &flexv1.Site{}
	if err := env.Client.Get(ctx, key, site); err != nil {
		return err
	}
	if site.Status.ObservedGeneration > 0 || len(site.Status.Conditions) > 0 || site.Labels[flexv1.IDLabel] != "" {
		return fmt.Errorf("site %s was reconciled: %+v, labels %v", key, site.Status, site.Labels)
	}
	return nil
}

var _ = Describe("Leader election with two replicas", Ordered, func() {
	var (
		a, b             *replica
		leader, follower *replica
		ns, token        string
	)

	BeforeAll(func(ctx SpecContext) {
		// Both start at once, both crash rather than hand the lease back.
		a = startReplica(ctx, "replica-a", false)
		b = startReplica(ctx, "replica-b", false)
		ns = "org-failover"
		Expect(bootstrap.EnsureOrganisation(ctx, env.Client, bootstrap.Organisation{
			Namespace: ns, Username: "failover-app", Password: "failover-password",
			Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards, flexv1.RoleComponents}})).To(Succeed())
	})

	It("elects exactly one leader, and keeps it", func(ctx SpecContext) {
		Eventually(func() int {
			n := 0
			for _, r := range []*replica{a, b} {
				if r.leading() {
					n++
				}
			}
			return n
		}).WithTimeout(2 * leaseDuration).Should(Equal(1))
		a.failedEarly()
		b.failedEarly()
		leader, follower = a, b
		if b.leading() {
			leader, follower = b, a
		}
		held := holder(ctx)
		Expect(held).NotTo(BeEmpty())
		// For several lease durations: still one leader, the same one, renewing the Lease.
		renewed := lease(ctx).Spec.RenewTime.Time
		Consistently(func(g Gomega) {
			g.Expect(leader.leading()).To(BeTrue())
			g.Expect(follower.leading()).To(BeFalse())
			g.Expect(holder(ctx)).To(Equal(held))
		}).WithTimeout(2 * leaseDuration).WithPolling(250 * time.Millisecond).Should(Succeed())
		Expect(lease(ctx).Spec.RenewTime.Time).To(BeTemporally(">", renewed), "the leader renews its lease")
		AddReportEntry("leader", leader.name+" ("+held+")")
		GinkgoWriter.Printf("leader: %s (lease holder %s); follower: %s\n", leader.name, held, follower.name)
	})

	It("serves the API from both replicas: onboard through one, read through the other", func() {
		// Log in through the follower, onboard through it, read through the leader: the two
		// replicas share the signing keys and the cluster, not memory.
		Eventually(func(g Gomega) {
			status, body := follower.call(g, "POST", "/auth/token-form", "", url.Values{
				"username": {"failover-app"}, "password": {"failover-password"}, "grant_type": {"password"}})
			g.Expect(status).To(Equal(http.StatusOK), "%v", body)
			token = body["access_token"].(string)
		}).Should(Succeed())
		status, body := follower.call(Default, "POST", "/entities/site/onboard", token, household("1200000000011"))
		Expect(status).To(Equal(http.StatusOK), "%v", body)
		siteID := body["site"].(map[string]any)["site_id"].(string)
		Expect(body["enrolment"]).To(HaveKeyWithValue("status", "enrolled"))
		Eventually(func(g Gomega) {
			status, body := leader.call(g, "GET", "/entities/site/"+siteID+"/eligibility", token, nil)
			g.Expect(status).To(Equal(http.StatusOK), "%v", body)
			g.Expect(body["eligible_propositions"]).To(ContainElement("limited_pause"))
		}).Should(Succeed())
		status, body = leader.call(Default, "GET", "/auth/users/me/", token, nil)
		Expect(status).To(Equal(http.StatusOK), "a token of the follower verifies on the leader: %v", body)
		Eventually(func() error {
			return computed(context.Background(), client.ObjectKey{Namespace: ns, Name: identity.SiteNameForMPAN("1200000000011")})
		}).Should(Succeed(), "the leader reconciled the onboarded site")
	})

	It("fails over when the leader dies, and the new leader finishes the work that arrived meanwhile", func(ctx SpecContext) {
		before := lease(ctx)
		crashed := time.Now()
		leader.stop() // its context ends; the lease is not released (a crash)
		stopped := time.Since(crashed)
		Expect(lease(ctx).Spec.HolderIdentity).To(Equal(before.Spec.HolderIdentity), "a crashed leader does not hand over")

		// Work that arrives while nobody leads: objects declared directly, and an onboard
		// through the surviving replica's REST API (the API needs no lease).
		pending := make([]client.ObjectKey, 0, 4)
		for _, mpan := range []string{"2301234567894", "1012345678903", "1234567890126"} {
			pending = append(pending, pendingHousehold(ctx, ns, mpan))
		}
		status, body := follower.call(Default, "POST", "/entities/site/onboard", token, household("1000000000021"))
		Expect(status).To(Equal(http.StatusOK), "onboard while nobody leads: %v", body)
		pending = append(pending, client.ObjectKey{Namespace: ns, Name: identity.SiteNameForMPAN("1000000000021")})
		declared := time.Since(crashed)

		// Until the follower leads, no controller touches the declared sites.
		for !follower.leading() && time.Since(crashed) < 2*leaseDuration {
			for _, key := range pending[:3] {
				Expect(untouched(ctx, key)).To(Succeed(), "reconciled while nobody leads")
			}
			follower.failedEarly()
			time.Sleep(100 * time.Millisecond)
		}
		elected := time.Since(crashed)
		Expect(follower.leading()).To(BeTrue(), "the follower took over within %v", 2*leaseDuration)
		Expect(elected).To(BeNumerically("<", leaseDuration+renewDeadline),
			"the follower leads within the lease duration (plus its retry period) of the crash")
		after := lease(ctx)
		Expect(after.Spec.HolderIdentity).NotTo(Equal(before.Spec.HolderIdentity))
		Expect(ptrInt(after.Spec.LeaseTransitions)).To(Equal(ptrInt(before.Spec.LeaseTransitions) + 1))

		for _, key := range pending {
			Eventually(func() error { return computed(ctx, key) }).Should(Succeed())
		}
		done := time.Since(crashed)
		follower.failedEarly() // the new leader is still running

		report := fmt.Sprintf("old leader stopped in %v; 4 households declared %v after the crash; follower elected %v after "+
			"the crash (lease %v, renew deadline %v, retry %v); all pending work reconciled %v after the crash (%v after the election)",
			stopped.Round(time.Millisecond), declared.Round(time.Millisecond), elected.Round(time.Millisecond),
			leaseDuration, renewDeadline, retryPeriod, done.Round(time.Millisecond), (done - elected).Round(time.Millisecond))
		AddReportEntry("failover timings", report)
		GinkgoWriter.Println(report)
	})
})

func ptrInt(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

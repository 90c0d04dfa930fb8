package controllers_test

import (
	"context"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
)

func newNamespace(ctx context.Context) string {
	ns, err := env.Namespace(ctx)
	Expect(err).NotTo(HaveOccurred())
	return ns
}

func site(ns, mpan string, mutate ...func(*flexv1.Site)) *flexv1.Site {
	s := &flexv1.Site{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.SiteNameForMPAN(mpan)},
		Spec:       flexv1.SiteSpec{MPAN: mpan, Postcode: "SW1A 1AA"},
	}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func asset(ns, siteName, externalID string, mutate ...func(*flexv1.Asset)) *flexv1.Asset {
	a := &flexv1.Asset{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.AssetName(externalID)},
		Spec: flexv1.AssetSpec{SiteName: siteName, ExternalID: externalID, Type: flexv1.AssetTypeCharger,
			PowerW: ptr.To[int64](7400)},
	}
	for _, m := range mutate {
		m(a)
	}
	return a
}

// cop11Charger makes an asset qualify through asset-level metering.
func cop11Charger(a *flexv1.Asset) {
	a.Spec.Model = "zappi"
	a.Spec.InstallationDate = "2025-06-15"
}

func enrolment(ns, siteName string, p flexv1.PropositionName) *flexv1.Enrolment {
	return &flexv1.Enrolment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.EnrolmentName(siteName, p)},
		Spec:       flexv1.EnrolmentSpec{SiteName: siteName, Proposition: p},
	}
}

func create(ctx context.Context, objs ...client.Object) {
	for _, o := range objs {
		Expect(k8sClient.Create(ctx, o)).To(Succeed())
	}
}

// fetched returns a function that reads obj afresh, for Eventually: a failed read fails the
// attempt (through the Gomega it is handed), not the spec.
func fetched[T client.Object](ctx context.Context, obj T) func(g Gomega) T {
	return func(g Gomega) T {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		return obj
	}
}

func gone(ctx context.Context, obj client.Object) func() bool {
	return func() bool {
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err)
	}
}

func eligibleFor(s *flexv1.Site) []flexv1.PropositionName { return s.Status.EligiblePropositions }

// issuesOf returns an asset's issues for a proposition from a site's status.
func issuesOf(s *flexv1.Site, assetName string, p flexv1.PropositionName) []flexv1.EligibilityIssue {
	for _, a := range s.Status.Assets {
		if a.Name != assetName {
			continue
		}
		for _, pe := range a.Propositions {
			if pe.Proposition == p {
				return pe.Issues
			}
		}
	}
	return []flexv1.EligibilityIssue{"<asset or proposition missing from status>"}
}

func phaseOf(e *flexv1.Enrolment) flexv1.EnrolmentPhase { return e.Status.Phase }

func historyOf(s *flexv1.Site) []flexv1.EnrolmentPeriod { return s.Status.EnrolmentHistory }

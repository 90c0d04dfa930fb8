package household

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	claimrule "github.com/flexsite/flexsite/internal/claim"
	"github.com/flexsite/flexsite/internal/identity"
)

// Who holds a meter point. An organisation's MPAN belongs to at most one Site. A Site created
// as mpan-<MPAN> holds its MPAN by its name (the API server refuses a second object of that
// name), at no cost. A Site that comes to hold an MPAN under another name (its MPAN changed:
// PATCH /entities/site, or a kubectl edit) holds it through an MPANClaim named mpan-<MPAN>:
// two claimants race for one object name, so exactly one wins.
//
// The two ways meet when a site is created as mpan-<MPAN> while another site claims the same
// MPAN. Each side writes first and reads the other side after (ClaimMPAN: claim, then look for
// sites holding the MPAN; Unclaimed: create the site, then look for a claim). The API server's
// reads are linearisable, so at least one of the two sees the other and backs off: never both
// go ahead. The site a creator backs off from is its own, still in flight (never evaluated,
// never answered), and it deletes it at once.
//
// A claim whose site does not hold its MPAN is pending (a change on its way) for ClaimGrace,
// and stale after it (the change died half-way, or the site moved on): anyone may then take it,
// and the Site controller deletes it.
//
// A site declared by kubectl or GitOps with an MPAN its name does not hold gets its claim from
// the Site controller (NewDeclaredClaim), made only once the site is stored with the MPAN.
// Such a claim has no grace: no request is on its way behind it, so once its site does not
// hold the MPAN (it moved on, or the write the controller saw was a failed request's, since
// rolled back) it is stale at once.

// ClaimGrace is how long a claim whose site does not hold its MPAN is honoured: the request
// that made it is still writing the site.
const ClaimGrace = 2 * time.Minute

// MPANTakenError says another site holds the MPAN, or is about to.
type MPANTakenError struct {
	MPAN string
	// Holder is the site that holds the MPAN, or claimed it.
	Holder string
	// Pending: the holder claimed the MPAN a moment ago and is still changing to it.
	Pending bool
}

func (e *MPANTakenError) Error() string {
	if e.Pending {
		return fmt.Sprintf("MPAN %s is being moved to site %s", e.MPAN, e.Holder)
	}
	return fmt.Sprintf("MPAN %s is held by site %s", e.MPAN, e.Holder)
}

// HoldsByName reports whether the site holds its MPAN by its name.
func HoldsByName(site *flexv1.Site) bool {
	return site.Spec.MPAN != "" && site.Name == identity.SiteNameForMPAN(site.Spec.MPAN)
}

// NewClaim is the claim of mpan for site.
func NewClaim(site *flexv1.Site, mpan string) *flexv1.MPANClaim {
	return &flexv1.MPANClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: site.Namespace, Name: identity.MPANClaimName(mpan)},
		Spec:       flexv1.MPANClaimSpec{MPAN: mpan, SiteName: site.Name},
	}
}

// NewDeclaredClaim is the claim of mpan the Site controller makes for site, declared with it.
func NewDeclaredClaim(site *flexv1.Site, mpan string) *flexv1.MPANClaim {
	c := NewClaim(site, mpan)
	c.Annotations = map[string]string{flexv1.DeclaredClaimAnnotation: "true"}
	return c
}

// Declared reports whether c is a claim the Site controller made (NewDeclaredClaim).
func Declared(c *flexv1.MPANClaim) bool {
	return c.Annotations[flexv1.DeclaredClaimAnnotation] == "true"
}

// Standing judges c given its site (nil when the site does not exist). A declared claim
// (NewDeclaredClaim) has no grace.
func Standing(c *flexv1.MPANClaim, site *flexv1.Site, now time.Time) claimrule.Standing {
	held := site != nil && site.DeletionTimestamp.IsZero() && site.Spec.MPAN == c.Spec.MPAN
	grace := ClaimGrace
	if Declared(c) {
		grace = 0
	}
	return claimrule.Judge(held, c.CreationTimestamp.Time, grace, now)
}

package household

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
)

// EnsureID gives a Site or Asset its API id (the flexsite.io/id label) if it has none yet, and
// reports whether it did. Objects created through the REST API get theirs at creation; those
// created with kubectl or by GitOps get theirs from their controller.
func EnsureID(obj metav1.Object) bool {
	labels := obj.GetLabels()
	if labels[flexv1.IDLabel] != "" {
		return false
	}
	if labels == nil {
		labels = map[string]string{}
	}
	labels[flexv1.IDLabel] = identity.NewID()
	obj.SetLabels(labels)
	return true
}

// NewSite is a Site as a request creates it (named by identity from its natural key), with its
// id, and with the finalizer set at creation so that the controller need not write again to
// add it.
func NewSite(ns, name string) *flexv1.Site {
	site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: []string{flexv1.Finalizer}}}
	EnsureID(site)
	return site
}

// NewAsset is an Asset of site as a request creates it: named after its external id, with its
// id, and with site as its controller when site is stored already (a site the same request
// creates gives its assets their controller once it is: ControlledBy).
func NewAsset(site *flexv1.Site, externalID string, assetType flexv1.AssetType) *flexv1.Asset {
	asset := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: site.Namespace, Name: identity.AssetName(externalID)},
		Spec: flexv1.AssetSpec{SiteName: site.Name, ExternalID: externalID, Type: assetType}}
	EnsureID(asset)
	ControlledBy(asset, site)
	return asset
}

// NewEnrolment is the Enrolment of a stored site in a proposition as a request creates it, with
// the site as its controller and the finalizer that records a withdrawal when it goes.
func NewEnrolment(site *flexv1.Site, p flexv1.PropositionName, override bool) *flexv1.Enrolment {
	enrolment := &flexv1.Enrolment{
		ObjectMeta: metav1.ObjectMeta{Namespace: site.Namespace, Name: identity.EnrolmentName(site.Name, p),
			Finalizers: []string{flexv1.Finalizer}},
		Spec: flexv1.EnrolmentSpec{SiteName: site.Name, Proposition: p, OverrideWithdrawal: override},
	}
	ControlledBy(enrolment, site)
	return enrolment
}

// NewDeviceConnection is the connection of a stored site to a device provider as a request
// creates it, with the site as its controller.
func NewDeviceConnection(site *flexv1.Site, provider string) *flexv1.DeviceConnection {
	conn := &flexv1.DeviceConnection{
		ObjectMeta: metav1.ObjectMeta{Namespace: site.Namespace, Name: identity.DeviceConnectionName(site.Name, provider)},
		Spec:       flexv1.DeviceConnectionSpec{SiteName: site.Name, Provider: provider},
	}
	ControlledBy(conn, site)
	return conn
}

// ControlledBy makes site the controller of child (an Asset, Enrolment, DeviceConnection or
// RewardLedger of it), and reports whether that changed child. The reference is what puts a
// household's objects on its Site's shard (internal/shards) and lets the garbage collector
// tidy what a deleted site's finalizer missed. Whoever creates a child gives it the reference
// in the create, so that nothing writes the child again for it; the Site controller adopts
// only children written without one (kubectl, GitOps, older data). A child another object
// already controls is left alone: it is not this site's to take. A site not stored yet (no
// UID) gives nothing. The reference does not block the site's deletion (blockOwnerDeletion
// left out: false).
func ControlledBy(child metav1.Object, site *flexv1.Site) bool {
	if site.UID == "" || metav1.GetControllerOfNoCopy(child) != nil {
		return false
	}
	child.SetOwnerReferences(append(child.GetOwnerReferences(), metav1.OwnerReference{
		APIVersion: flexv1.GroupVersion.String(), Kind: "Site", Name: site.Name, UID: site.UID,
		Controller: ptr.To(true)}))
	return true
}

// SiteNameOf is the name of the Site a household's object belongs to (its spec.siteName): an
// Asset, Enrolment, DeviceConnection, RewardLedger or MPANClaim; "" for any other object.
func SiteNameOf(obj any) string {
	switch o := obj.(type) {
	case *flexv1.Asset:
		return o.Spec.SiteName
	case *flexv1.Enrolment:
		return o.Spec.SiteName
	case *flexv1.DeviceConnection:
		return o.Spec.SiteName
	case *flexv1.RewardLedger:
		return o.Spec.SiteName
	case *flexv1.MPANClaim:
		return o.Spec.SiteName
	}
	return ""
}

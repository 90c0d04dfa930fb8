package householdstore

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/index"
)

// DeleteChildren deletes what belongs to a site that is going: its Enrolments first (their
// finalizer sees the site going and records no withdrawal), then its Assets and its
// RewardLedger. They are listed from r, which should be the API server rather than a cache,
// so that none created a moment ago is left behind: it is the Site finalizer's (a controller
// may LIST; a request path may not: DeleteFoundChildren). It answers the children that still
// exist (deleted now or already on their way out); the site may go when none remain.
func DeleteChildren(ctx context.Context, c client.Client, r client.Reader, site *flexv1.Site) ([]client.Object, error) {
	var children []client.Object
	for _, list := range []client.ObjectList{&flexv1.EnrolmentList{}, &flexv1.AssetList{}, &flexv1.RewardLedgerList{},
		&flexv1.MPANClaimList{},
		// A device connection's finalizer revokes its tokens at the provider and deletes them.
		&flexv1.DeviceConnectionList{}} {
		if err := r.List(ctx, list, index.OfSiteOnAPIServer(site.Namespace, site.Name)); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			children = append(children, item.(client.Object))
		}
	}
	return deleteAll(ctx, c, site, children)
}

// DeleteFoundChildren is DeleteChildren for a request path (offboard, delete site), which may
// not LIST (docs/scale.md, "Request paths: no LIST"): the children are those lookup finds (a
// request's is index.NewFreshLookup: what the cache has seen, as stored now) and the
// RewardLedger by its name, read from r by GET. One made a moment ago that the cache has not
// seen is left to the Site finalizer (DeleteChildren), which the site's deletion sets going.
func DeleteFoundChildren(ctx context.Context, c client.Client, r client.Reader, lookup index.Lookup,
	site *flexv1.Site) ([]client.Object, error) {
	var children []client.Object
	enrolments, err := lookup.EnrolmentsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return nil, err
	}
	for _, o := range enrolments {
		children = append(children, o)
	}
	assets, err := lookup.AssetsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return nil, err
	}
	for _, o := range assets {
		children = append(children, o)
	}
	ledger, err := LedgerOf(ctx, r, site)
	if err != nil {
		return nil, err
	}
	if ledger != nil {
		children = append(children, ledger)
	}
	claims, err := lookup.MPANClaimsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return nil, err
	}
	for _, o := range claims {
		children = append(children, o)
	}
	connections, err := lookup.DeviceConnectionsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return nil, err
	}
	for _, o := range connections {
		children = append(children, o)
	}
	return deleteAll(ctx, c, site, children)
}

// deleteAll deletes the site's children not on their way out already, in order, and answers
// them all.
func deleteAll(ctx context.Context, c client.Client, site *flexv1.Site, children []client.Object) ([]client.Object, error) {
	for _, child := range children {
		if !child.GetDeletionTimestamp().IsZero() {
			continue
		}
		if err := c.Delete(ctx, child); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("deleting %T %s of site %s: %w", child, child.GetName(), site.Name, err)
		}
	}
	return children, nil
}

// AdoptChildren gives each child of site found in c's cache (its Assets, which the caller has
// found already, its Enrolments, device connections and RewardLedger) the site as controller
// (household.ControlledBy), in one patch each, once, if they lack it. The use cases that create
// children give them the reference in the create, so these patches are for children written by
// kubectl or GitOps, and for those written before the reference existed. A patch meets the
// stored object or conflicts (a requeue).
func AdoptChildren(ctx context.Context, c client.Client, site *flexv1.Site, assets []*flexv1.Asset) error {
	lookup := index.NewLookup(c)
	var children []client.Object
	enrolments, err := lookup.EnrolmentsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return err
	}
	connections, err := lookup.DeviceConnectionsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return err
	}
	for _, a := range assets {
		children = append(children, a)
	}
	for _, e := range enrolments {
		children = append(children, e)
	}
	for _, d := range connections {
		children = append(children, d)
	}
	ledger, err := LedgerOf(ctx, c, site)
	if err != nil {
		return err
	}
	if ledger != nil {
		children = append(children, ledger)
	}
	for _, child := range children {
		if !child.GetDeletionTimestamp().IsZero() || metav1.GetControllerOfNoCopy(child) != nil {
			continue
		}
		adopted := child.DeepCopyObject().(client.Object)
		household.ControlledBy(adopted, site)
		patch := client.MergeFromWithOptions(child, client.MergeFromWithOptimisticLock{})
		if err := c.Patch(ctx, adopted, patch); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("adopting %T %s of site %s: %w", child, child.GetName(), site.Name, err)
		}
	}
	return nil
}

package householdstore

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/index"
)

// DeleteChildren deletes what belongs to a site that is going: its Enrolments first (their
// finalizer sees the site going and records no withdrawal), then its Assets and its
// RewardLedger. They are listed from r, which should be the API server rather than a cache,
// so that none created a moment ago is left behind. It answers the children that still
// exist (deleted now or already on their way out); the site may go when none remain.
func DeleteChildren(ctx context.Context, c client.Client, r client.Reader, site *flexv1.Site) ([]client.Object, error) {
	var remaining []client.Object
	children := []client.ObjectList{&flexv1.EnrolmentList{}, &flexv1.AssetList{}, &flexv1.RewardLedgerList{}, &flexv1.MPANClaimList{},
		// A device connection's finalizer revokes its tokens at the provider and deletes them.
		&flexv1.DeviceConnectionList{}}
	for _, list := range children {
		if err := r.List(ctx, list, index.OfSiteOnAPIServer(site.Namespace, site.Name)); err != nil {
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, item := range items {
			child := item.(client.Object)
			remaining = append(remaining, child)
			if !child.GetDeletionTimestamp().IsZero() {
				continue
			}
			if err := c.Delete(ctx, child); client.IgnoreNotFound(err) != nil {
				return nil, fmt.Errorf("deleting %T %s of site %s: %w", child, child.GetName(), site.Name, err)
			}
		}
	}
	return remaining, nil
}

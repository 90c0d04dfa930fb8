// Package index sets up the manager's cache: what it holds (CacheOptions), and the field
// indexes that the controllers and the REST facade look objects up by, so that a lookup by
// natural key or API id is an index hit, not a scan.
package index

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Index names. Each is a field of the indexed kind (or the flexsite.io/id label).
const (
	// ID indexes Sites and Assets by their API id (the flexsite.io/id label).
	ID = "metadata.labels.id"
	// SiteName indexes Assets, Enrolments, RewardLedgers and MPANClaims by the site they belong to.
	SiteName = "spec.siteName"
	// AssetModel indexes Assets by the asset model they name.
	AssetModel = "spec.model"
	// ExternalID indexes Assets by the API client's external id.
	ExternalID = "spec.externalID"
	// MPAN indexes Sites by meter point.
	MPAN = "spec.mpan"
	// ExternalUserID indexes Sites by the end user of the component-token flow.
	ExternalUserID = "spec.externalUserID"
	// Username indexes APIClients by login name.
	Username = "spec.username"
)

// Register adds every Flexsite index to the indexer (a manager's or a cache's).
func Register(ctx context.Context, indexer client.FieldIndexer) error {
	one := func(v string) []string {
		if v == "" {
			return nil
		}
		return []string{v}
	}
	indexes := []struct {
		obj     client.Object
		field   string
		extract client.IndexerFunc
	}{
		{&flexv1.Site{}, ID, func(o client.Object) []string { return one(o.GetLabels()[flexv1.IDLabel]) }},
		{&flexv1.Site{}, MPAN, func(o client.Object) []string { return one(o.(*flexv1.Site).Spec.MPAN) }},
		{&flexv1.Site{}, ExternalUserID, func(o client.Object) []string { return one(o.(*flexv1.Site).Spec.ExternalUserID) }},
		{&flexv1.Asset{}, ID, func(o client.Object) []string { return one(o.GetLabels()[flexv1.IDLabel]) }},
		{&flexv1.Asset{}, SiteName, func(o client.Object) []string { return one(o.(*flexv1.Asset).Spec.SiteName) }},
		{&flexv1.Asset{}, AssetModel, func(o client.Object) []string { return one(o.(*flexv1.Asset).Spec.Model) }},
		{&flexv1.Asset{}, ExternalID, func(o client.Object) []string { return one(o.(*flexv1.Asset).Spec.ExternalID) }},
		{&flexv1.Enrolment{}, SiteName, func(o client.Object) []string { return one(o.(*flexv1.Enrolment).Spec.SiteName) }},
		{&flexv1.RewardLedger{}, SiteName, func(o client.Object) []string { return one(o.(*flexv1.RewardLedger).Spec.SiteName) }},
		{&flexv1.MPANClaim{}, SiteName, func(o client.Object) []string { return one(o.(*flexv1.MPANClaim).Spec.SiteName) }},
		{&flexv1.APIClient{}, Username, func(o client.Object) []string { return one(o.(*flexv1.APIClient).Spec.Username) }},
	}
	for _, ix := range indexes {
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return err
		}
	}
	return nil
}

package householdstore

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/index"
)

// AssetTypes are the types of the assets of namespace with these API ids, found through the
// index Lookup of r (the manager's cache): one lookup per id, never a List of the namespace.
// An id no asset has (one deleted since) is left out: its caller words it as a "device".
func AssetTypes(ctx context.Context, r client.Reader, namespace string, ids []string) (map[string]flexv1.AssetType, error) {
	lookup := index.NewLookup(r)
	out := make(map[string]flexv1.AssetType, len(ids))
	for _, id := range ids {
		if _, done := out[id]; done {
			continue
		}
		found, err := lookup.AssetsByID(ctx, namespace, id)
		if err != nil {
			return nil, err
		}
		if len(found) > 0 {
			out[id] = found[0].Spec.Type
		}
	}
	return out, nil
}

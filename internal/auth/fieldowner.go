package auth

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Every write the use cases (internal/app) make for a caller names who made it: the field manager is the API client (and the end user,
// when a component token made it), so `kubectl get site -o yaml --show-managed-fields` shows
// which client changed which field, as it shows kubectl's and Flux's changes. Writes outside a
// request (none today) stay the manager's.

// FieldManagerPrefix starts the field manager of every write made for an API client or end user.
const FieldManagerPrefix = "flexsite-api:"

// maxFieldManager is the API server's bound on a field manager's length.
const maxFieldManager = 128

// FieldManager names the writer of a request made with p.
func FieldManager(p *Principal) string {
	name := FieldManagerPrefix + p.ClientName
	if p.Kind == KindEndUser {
		name += "/user:" + p.UserID
	}
	if len(name) > maxFieldManager {
		name = name[:maxFieldManager]
	}
	return name
}

// OwnedClient writes with the field manager of the request's principal (from the context).
type OwnedClient struct{ client.Client }

func owner(ctx context.Context) (client.FieldOwner, bool) {
	p, ok := PrincipalFrom(ctx)
	if !ok || p == nil {
		return "", false
	}
	return client.FieldOwner(FieldManager(p)), true
}

func (c OwnedClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if o, ok := owner(ctx); ok {
		opts = append(opts, o)
	}
	return c.Client.Create(ctx, obj, opts...)
}

func (c OwnedClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if o, ok := owner(ctx); ok {
		opts = append(opts, o)
	}
	return c.Client.Update(ctx, obj, opts...)
}

func (c OwnedClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if o, ok := owner(ctx); ok {
		opts = append(opts, o)
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c OwnedClient) Status() client.SubResourceWriter { return ownedStatus{c.Client.Status()} }

type ownedStatus struct{ client.SubResourceWriter }

func (s ownedStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if o, ok := owner(ctx); ok {
		opts = append(opts, o)
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

func (s ownedStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if o, ok := owner(ctx); ok {
		opts = append(opts, o)
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

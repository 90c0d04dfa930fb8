// Package organisation bootstraps an organisation on the manager's side: its access to the
// organisation's Secrets.
package organisation

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
)

// Reconciler is an organisation's bootstrap on the manager's side: when a
// namespace carries flexsite.io/organisation (flexsite-admin's YAML, the embedded demo, the
// bench), it gives the manager the Secrets verbs there (bootstrap.EnsureOrganisationAccess),
// and nowhere else.
type Reconciler struct {
	client.Client
	// APIReader reads the RoleBinding (not cached: the manager may get RoleBindings, not
	// list or watch them).
	APIReader client.Reader
	Access    bootstrap.OrganisationAccess
}

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Reconcile gives the manager its access to an organisation's Secrets.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, req.NamespacedName, ns); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if _, ok := ns.Labels[flexv1.OrganisationLabel]; !ok || !ns.DeletionTimestamp.IsZero() || !bootstrap.Grantable(ns.Name) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, bootstrap.EnsureOrganisationAccess(ctx, r.Client, r.APIReader, ns.Name, r.Access)
}

// SetupWithManager watches the organisations' namespaces.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	organisations := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetLabels()[flexv1.OrganisationLabel]
		return ok
	})
	return ctrl.NewControllerManagedBy(mgr).Named("organisation").
		For(&corev1.Namespace{}, builder.WithPredicates(organisations)).
		Complete(r)
}

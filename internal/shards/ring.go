// Package shards runs Flexsite's per-site reconcile work as shards of one ControllerRing of
// timebertt/kubernetes-controller-sharding (docs/operations.md, "Sharding"): the sharder assigns
// every Site, and the objects each Site controls, to one shard by a label; each replica holds a
// shard lease and reconciles what carries its name. Organisation-wide and cluster-wide work keeps
// one leader. Nothing here decides membership or hand-over: the sharder and its leases do.
package shards

import (
	shardingv1alpha1 "github.com/timebertt/kubernetes-controller-sharding/pkg/apis/sharding/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// RingName names Flexsite's ControllerRing; it is part of the shard and drain label keys.
const RingName = "flexsite"

// ShardLabel holds the name of the shard an object is assigned to (set by the sharder).
var ShardLabel = shardingv1alpha1.LabelShard(RingName)

// DrainLabel asks the shard that holds an object to let go of it (set by the sharder when it
// moves the object; the shard removes both labels and stops reconciling it).
var DrainLabel = shardingv1alpha1.LabelDrain(RingName)

// Ring is Flexsite's ControllerRing: Sites, and the per-site kinds each Site controls (they
// carry a controller reference to it, household.ControlledBy), so that a household's objects
// land on one shard. Only organisation namespaces take part.
func Ring() *shardingv1alpha1.ControllerRing {
	group := flexv1.GroupVersion.Group
	return &shardingv1alpha1.ControllerRing{
		TypeMeta:   metav1.TypeMeta{APIVersion: shardingv1alpha1.SchemeGroupVersion.String(), Kind: "ControllerRing"},
		ObjectMeta: metav1.ObjectMeta{Name: RingName},
		Spec: shardingv1alpha1.ControllerRingSpec{
			Resources: []shardingv1alpha1.RingResource{{
				GroupResource: metav1.GroupResource{Group: group, Resource: "sites"},
				ControlledResources: []metav1.GroupResource{
					{Group: group, Resource: "assets"},
					{Group: group, Resource: "enrolments"},
					{Group: group, Resource: "deviceconnections"},
					{Group: group, Resource: "rewardledgers"},
				},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: flexv1.OrganisationLabel, Operator: metav1.LabelSelectorOpExists}}},
		},
	}
}

// RingLists are lists of Ring's kinds (to read every object the sharder assigns).
func RingLists() []client.ObjectList {
	return []client.ObjectList{&flexv1.SiteList{}, &flexv1.AssetList{}, &flexv1.EnrolmentList{},
		&flexv1.DeviceConnectionList{}, &flexv1.RewardLedgerList{}}
}

// ShardOf is the shard an object is assigned to ("" while the sharder has not assigned it).
func ShardOf(obj client.Object) string { return obj.GetLabels()[ShardLabel] }

package household

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func TestControlledBy(t *testing.T) {
	site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: "mpan-1", UID: types.UID("site-uid")}}
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "notes", UID: "cm-uid"}
	foreignController := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Household", Name: "h", UID: "h-uid",
		Controller: ptr.To(true)}
	cases := []struct {
		name     string
		site     *flexv1.Site
		refs     []metav1.OwnerReference
		changed  bool
		wantRefs int
	}{
		{name: "a child without references gets its site as controller", site: site, changed: true, wantRefs: 1},
		{name: "a plain owner reference stays beside it", site: site, refs: []metav1.OwnerReference{other}, changed: true, wantRefs: 2},
		{name: "a child its site controls already is left as it is", site: site, wantRefs: 1,
			refs: []metav1.OwnerReference{{APIVersion: flexv1.GroupVersion.String(), Kind: "Site", Name: "mpan-1", UID: "site-uid",
				Controller: ptr.To(true)}}},
		{name: "a child another object controls is not taken", site: site, refs: []metav1.OwnerReference{foreignController}, wantRefs: 1},
		{name: "a site not stored yet (no UID) adopts nothing", site: &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Name: "mpan-1"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			child := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: "a", OwnerReferences: c.refs}}
			if got := ControlledBy(child, c.site); got != c.changed {
				t.Fatalf("changed = %v, want %v", got, c.changed)
			}
			if len(child.OwnerReferences) != c.wantRefs {
				t.Fatalf("%d owner references, want %d: %v", len(child.OwnerReferences), c.wantRefs, child.OwnerReferences)
			}
			if !c.changed {
				return
			}
			ref := metav1.GetControllerOf(child)
			if ref == nil || ref.Kind != "Site" || ref.Name != "mpan-1" || ref.UID != "site-uid" ||
				ref.APIVersion != "flexsite.io/v1alpha1" || ptr.Deref(ref.BlockOwnerDeletion, false) {
				t.Fatalf("controller reference %+v, want the site's, not blocking its deletion", ref)
			}
		})
	}
}

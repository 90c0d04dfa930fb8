package keptanswer_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app/keptanswer"
)

// What is kept stays within its bound (arbitrary sites make room), and an answer is served
// only for exactly the site, assets and catalogue version it was kept with.
func TestKeptAnswersStayWithinTheirBoundAndMatchExactly(t *testing.T) {
	body := make([]byte, 1000)
	k := keptanswer.New(10 * (1000 + 256 + 96)) // ten answers of one asset: bytes and bookkeeping
	site := func(i int) *flexv1.Site {
		return &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: fmt.Sprintf("site-%d", i),
			UID: types.UID(fmt.Sprint("uid-", i)), ResourceVersion: "1"}}
	}
	asset := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{UID: "asset", ResourceVersion: "1"}}
	for i := range 100 {
		k.Keep(site(i), []*flexv1.Asset{asset}, 1, 0, body)
	}
	held := 0
	for i := range 100 {
		if k.Answer(site(i), []*flexv1.Asset{asset}, 1, 0) != nil {
			held++
		}
	}
	if held == 0 || held > 10 {
		t.Fatalf("%d answers held under a bound of 10", held)
	}
	s := site(0)
	k.Keep(s, []*flexv1.Asset{asset}, 1, 0, body)
	moved := asset.DeepCopy()
	moved.ResourceVersion = "2"
	other := s.DeepCopy()
	other.Namespace = "other"
	for name, miss := range map[string]func() []byte{
		"a new asset version":     func() []byte { return k.Answer(s, []*flexv1.Asset{moved}, 1, 0) },
		"an asset more":           func() []byte { return k.Answer(s, []*flexv1.Asset{asset, moved}, 1, 0) },
		"no asset":                func() []byte { return k.Answer(s, nil, 1, 0) },
		"a new catalogue":         func() []byte { return k.Answer(s, []*flexv1.Asset{asset}, 2, 0) },
		"another organisation's":  func() []byte { return k.Answer(other, []*flexv1.Asset{asset}, 1, 0) },
		"a new site of that name": func() []byte { c := s.DeepCopy(); c.UID = "new"; return k.Answer(c, []*flexv1.Asset{asset}, 1, 0) },
		"a new site version": func() []byte {
			c := s.DeepCopy()
			c.ResourceVersion = "9"
			return k.Answer(c, []*flexv1.Asset{asset}, 1, 0)
		},
	} {
		if miss() != nil {
			t.Errorf("%s: the kept answer was served", name)
		}
	}
	if k.Answer(s, []*flexv1.Asset{asset}, 1, 0) == nil {
		t.Error("the kept answer was not served for what it was kept with")
	}
}

// Followed, an answer kept from lookups made since the last change is served by the site's id
// until a change of the site or one of its assets is told; one kept across a change, or
// before Follow, is not (the lookups' answer still is, and is held by id once served again
// with no change between).
func TestKeptAnswersByIDStandUntilTheSiteOrAnAssetChanges(t *testing.T) {
	body := []byte(`{"site_id":"id-1"}`)
	site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: "site-1", UID: "uid-1",
		ResourceVersion: "1", Labels: map[string]string{flexv1.IDLabel: "id-1"}}}
	asset := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{UID: "asset", ResourceVersion: "1"}}
	assets := []*flexv1.Asset{asset}
	served := func(k *keptanswer.Eligibility, catalogue uint64) bool {
		got, b := k.Current("org", "id-1", catalogue)
		if (got == nil) != (b == nil) || (got != nil && got != site) {
			t.Fatalf("Current answered the site %v with %d bytes", got, len(b))
		}
		return b != nil
	}

	k := keptanswer.New(1 << 20)
	k.Keep(site, assets, 1, k.Epoch(), body)
	if served(k, 1) {
		t.Fatal("served by id before Follow")
	}
	before := k.Epoch()
	k.Follow()
	if k.Answer(site, assets, 1, before) == nil || served(k, 1) {
		t.Fatal("an epoch read before Follow held the answer by id")
	}
	epoch := k.Epoch()
	if k.Answer(site, assets, 1, epoch) == nil || !served(k, 1) {
		t.Fatal("the answer found current since the last change is not held by id")
	}
	if served(k, 2) {
		t.Fatal("served by id under another catalogue version")
	}
	if _, b := k.Current("other", "id-1", 1); b != nil {
		t.Fatal("served by id in another namespace")
	}
	k.Changed("org", "another-site")
	if !served(k, 1) {
		t.Fatal("another site's change dropped the answer")
	}
	k.Changed("org", "site-1") // the site, or one of its assets
	if served(k, 1) || k.Answer(site, assets, 1, k.Epoch()) != nil {
		t.Fatal("served after its site changed")
	}

	epoch = k.Epoch()
	k.Changed("org", "another-site") // between the lookups and the keep
	k.Keep(site, assets, 1, epoch, body)
	if served(k, 1) {
		t.Fatal("an answer kept across a change is held by id")
	}
	if k.Answer(site, assets, 1, k.Epoch()) == nil || !served(k, 1) {
		t.Fatal("served again with no change between, the answer is not held by id")
	}
	k.Keep(site, assets, 1, k.Epoch(), body) // kept again: held by id once, not twice
	k.Changed("org", "site-1")
	if served(k, 1) {
		t.Fatal("served after its site changed")
	}
}

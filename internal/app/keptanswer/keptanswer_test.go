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
		k.Keep(site(i), []*flexv1.Asset{asset}, 1, body)
	}
	held := 0
	for i := range 100 {
		if k.Answer(site(i), []*flexv1.Asset{asset}, 1) != nil {
			held++
		}
	}
	if held == 0 || held > 10 {
		t.Fatalf("%d answers held under a bound of 10", held)
	}
	s := site(0)
	k.Keep(s, []*flexv1.Asset{asset}, 1, body)
	moved := asset.DeepCopy()
	moved.ResourceVersion = "2"
	other := s.DeepCopy()
	other.Namespace = "other"
	for name, miss := range map[string]func() []byte{
		"a new asset version":     func() []byte { return k.Answer(s, []*flexv1.Asset{moved}, 1) },
		"an asset more":           func() []byte { return k.Answer(s, []*flexv1.Asset{asset, moved}, 1) },
		"no asset":                func() []byte { return k.Answer(s, nil, 1) },
		"a new catalogue":         func() []byte { return k.Answer(s, []*flexv1.Asset{asset}, 2) },
		"another organisation's":  func() []byte { return k.Answer(other, []*flexv1.Asset{asset}, 1) },
		"a new site of that name": func() []byte { c := s.DeepCopy(); c.UID = "new"; return k.Answer(c, []*flexv1.Asset{asset}, 1) },
		"a new site version": func() []byte {
			c := s.DeepCopy()
			c.ResourceVersion = "9"
			return k.Answer(c, []*flexv1.Asset{asset}, 1)
		},
	} {
		if miss() != nil {
			t.Errorf("%s: the kept answer was served", name)
		}
	}
	if k.Answer(s, []*flexv1.Asset{asset}, 1) == nil {
		t.Error("the kept answer was not served for what it was kept with")
	}
}

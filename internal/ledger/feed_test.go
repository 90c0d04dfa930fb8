package ledger

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func fedObject(uid types.UID, rv string, credits ...int64) *flexv1.RewardLedger {
	l := &flexv1.RewardLedger{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: "mpan-1", UID: uid, ResourceVersion: rv}}
	for _, c := range credits {
		l.Spec.Transactions = append(l.Spec.Transactions, flexv1.RewardTransaction{CreditPence: c})
	}
	return l
}

// The feed keeps the latest ledger of each name, and forgets a deleted one only while no
// ledger created again under its name has replaced it.
func TestFeedKeepsAndForgets(t *testing.T) {
	steps := []struct {
		name     string
		keep     *flexv1.RewardLedger
		forget   types.UID
		want     bool
		wantRV   string
		wantSize int
	}{
		{name: "first seen", keep: fedObject("a", "1", 10), want: true, wantRV: "1", wantSize: 1},
		{name: "updated", keep: fedObject("a", "2", 10, 20), want: true, wantRV: "2", wantSize: 2},
		{name: "created again before the old one's delete is handled", keep: fedObject("b", "5", 7), want: true, wantRV: "5", wantSize: 1},
		{name: "the old one's delete leaves the new one", forget: "a", want: true, wantRV: "5", wantSize: 1},
		{name: "its own delete forgets it", forget: "b", want: false},
	}
	f := NewFeed()
	for _, s := range steps {
		if s.keep != nil {
			f.Keep(s.keep)
		} else {
			f.forget("org", "mpan-1", s.forget)
		}
		l, ok, err := f.Get("org", "mpan-1")
		if err != nil || ok != s.want || ok && (l.ResourceVersion != s.wantRV || l.Len() != s.wantSize) {
			t.Fatalf("%s: Get = %+v, %v, %v", s.name, l, ok, err)
		}
	}
	if _, ok, _ := f.Get("other", "mpan-1"); ok {
		t.Error("a ledger of another namespace was found")
	}
	if f.HasSynced() {
		t.Error("synced before Attach")
	}
}

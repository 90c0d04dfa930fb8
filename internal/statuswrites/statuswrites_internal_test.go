package statuswrites

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func TestStatusWritesBehind(t *testing.T) {
	site := func(rv string) *flexv1.Site {
		return &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: "s", ResourceVersion: rv}}
	}
	var w Writes
	if w.Behind(site("5")) {
		t.Fatal("behind with no write recorded")
	}
	w.Wrote(site("10"))
	for _, c := range []struct {
		cached string
		behind bool
	}{
		{"9", true},   // the cache has not seen the write yet
		{"10", false}, // it has: the record is dropped
		{"9", false},  // dropped, so an older copy is not held back any more
	} {
		if got := w.Behind(site(c.cached)); got != c.behind {
			t.Fatalf("cached version %s: behind %v, want %v", c.cached, got, c.behind)
		}
	}
	w.Wrote(site("20"))
	w.Forget(types.NamespacedName{Namespace: "org", Name: "s"})
	if w.Behind(site("19")) {
		t.Fatal("behind after forget")
	}
	w.Wrote(site("opaque"))
	if w.Behind(site("other")) {
		t.Fatal("unparsable versions held a reconcile back")
	}
	// A record not met again within statusWriteMemory goes: when met late, and in the
	// sweep of a later write.
	now := time.Unix(1000, 0)
	clocked := Writes{now: func() time.Time { return now }}
	clocked.Wrote(site("30"))
	now = now.Add(statusWriteMemory)
	if clocked.Behind(site("29")) {
		t.Fatal("a record past statusWriteMemory held a reconcile back")
	}
	clocked.Wrote(site("40"))
	other := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: "t", ResourceVersion: "41"}}
	now = now.Add(statusWriteMemory)
	clocked.Wrote(other)
	if len(clocked.versions) != 1 {
		t.Fatalf("%d records after the sweep, want only the last write's", len(clocked.versions))
	}
	var none *Writes
	none.Wrote(site("1"))
	if none.Behind(site("0")) {
		t.Fatal("a nil record held a reconcile back")
	}
}

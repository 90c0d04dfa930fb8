package controllers

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
)

// The NOTIFY bridge never blocks the listener's callbacks, however slow the controller: a
// controller that takes nothing while ten thousand notifications arrive, then a reconnection,
// then more, still gets every key noted (each once per round) and the resync.
func TestNotifyBridgeSlowConsumer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan event.GenericEvent) // unbuffered, and nobody reads it yet: the slowest consumer
	object := func(key types.NamespacedName) client.Object {
		return &flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	}
	noted := make(chan func(*db.Changes[types.NamespacedName]))
	listen := func(ctx context.Context, b *db.Changes[types.NamespacedName]) {
		for {
			select {
			case <-ctx.Done():
				return
			case f := <-noted:
				f(b) // the listening goroutine: it must come back at once
			}
		}
	}
	run := bridge(ch, listen, bridgeTargets{
		of: func(_ context.Context, key types.NamespacedName) []client.Object { return []client.Object{object(key)} },
		all: func(context.Context) []client.Object {
			return []client.Object{object(types.NamespacedName{Name: "every"})}
		},
	})
	go func() { _ = run(ctx) }()

	done := make(chan struct{})
	noted <- func(b *db.Changes[types.NamespacedName]) {
		// All of these on the listener's goroutine while the controller reads nothing: a callback
		// that waited for the controller would hang here.
		for i := range 10000 {
			b.Note(types.NamespacedName{Namespace: "org", Name: fmt.Sprintf("ev-%d", i%100)})
		}
		b.Resync()
		for i := range 50 {
			b.Note(types.NamespacedName{Namespace: "other", Name: fmt.Sprintf("ev-%d", i)})
		}
		close(done)
	}
	<-done

	want := map[string]bool{"/every": true}
	for i := range 100 {
		want[fmt.Sprintf("org/ev-%d", i)] = true
	}
	for i := range 50 {
		want[fmt.Sprintf("other/ev-%d", i)] = true
	}
	got := map[string]bool{}
	for len(got) < len(want) { // the controller now reads: everything noted reaches it
		e := <-ch
		key := client.ObjectKeyFromObject(e.Object).String()
		if !want[key] {
			t.Fatalf("got %s, never noted", key)
		}
		got[key] = true
	}
}

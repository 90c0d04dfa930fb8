package testenv

import (
	"context"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CountingReader counts the reads (Get) that reach the API server through it: what a test of a
// rate bound on reads measures.
type CountingReader struct {
	client.Reader
	gets atomic.Int32
}

// Get reads, and counts the read.
func (r *CountingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets.Add(1)
	return r.Reader.Get(ctx, key, obj, opts...)
}

// Gets is how many reads there were so far.
func (r *CountingReader) Gets() int32 { return r.gets.Load() }

package web

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"

	"github.com/flexsite/flexsite/internal/app"
)

// discardWriter is a ResponseWriter that keeps nothing: what a request costs the stack, not
// the recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

type appendedAnswer []byte

func (a appendedAnswer) AppendJSON(b []byte) []byte { return append(b, a...) }

// What Observe and WriteJSON cost a read that brings no request id, answering 12 KB kept
// encoded and 12 KB appended: compare with
// `go test ./internal/web/ -run X -bench Stack -benchmem`.
func BenchmarkStack(b *testing.B) {
	body := append([]byte("{}"), make([]byte, 11910)...)
	for _, c := range []struct {
		name   string
		answer any
	}{{"encoded", app.EncodedJSON(body)}, {"appended", appendedAnswer(body)}} {
		b.Run(c.name, func(b *testing.B) {
			h := Observe(logr.Discard(), nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				WriteJSON(w, http.StatusOK, c.answer)
			}))
			r := httptest.NewRequest(http.MethodGet, "/rewards/x/transactions?limit=52", nil)
			b.ReportAllocs()
			for b.Loop() {
				w := &discardWriter{h: http.Header{}}
				h.ServeHTTP(w, r)
			}
		})
	}
}

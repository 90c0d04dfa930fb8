package web

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
)

// streamFunc is a Streamer of a function.
type streamFunc func(ctx context.Context, w io.Writer) error

func (f streamFunc) StreamJSON(ctx context.Context, w io.Writer) error { return f(ctx, w) }

// A streamed answer that fails after its body began cannot become an error status: the
// connection is cut before the body's end, so the client reads a truncated body (an error),
// never a shorter one that parses; the access log line says it was aborted. One that does not
// fail is whole.
func TestStreamFailingAfterItBeganIsCut(t *testing.T) {
	var (
		mu    sync.Mutex
		lines []string
	)
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, args)
	}, funcr.Options{})
	fail := true
	srv := httptest.NewServer(Observe(log, nil, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteStream(log, w, r, http.StatusOK, streamFunc(func(_ context.Context, w io.Writer) error {
			// A first batch larger than the server's write buffer: the status is on its way
			// before the failure, as a real first batch's is.
			if _, err := io.WriteString(w, `{"transactions":[{"n":1}`+strings.Repeat(`,{"n":1}`, 8000)); err != nil {
				return err
			}
			if fail {
				return errors.New("the database went away")
			}
			_, err := io.WriteString(w, "]}\n")
			return err
		}))
	})))
	defer srv.Close()

	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || err == nil {
		t.Fatalf("status %d, %d bytes of body, read error %v: want 200 and a body cut short (a read error)", resp.StatusCode, len(body), err)
	}
	if resp.ContentLength != -1 {
		t.Errorf("Content-Length %d, want none (streamed)", resp.ContentLength)
	}
	mu.Lock()
	logged := strings.Join(lines, "\n")
	mu.Unlock()
	if !strings.Contains(logged, `"aborted"=true`) || !strings.Contains(logged, "the database went away") {
		t.Errorf("log %s: want the failure and an access log line saying aborted", logged)
	}

	fail = false
	resp, err = http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if want := `{"transactions":[{"n":1}` + strings.Repeat(`,{"n":1}`, 8000) + "]}\n"; err != nil || string(body) != want {
		t.Errorf("body of %d bytes, %v: want the whole answer (%d bytes)", len(body), err, len(want))
	}
}

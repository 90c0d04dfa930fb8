package ven_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	. "github.com/onsi/ginkgo/v2"

	"github.com/flexsite/flexsite/test/ven"
)

// receiver is a VEN's callback: an HTTPS server on loopback that keeps the OpenADR
// notifications it is sent with the bearer token the subscription gave, and counts what came
// without it.
type receiver struct {
	*httptest.Server
	bearer string

	mu            sync.Mutex
	notifications []ven.Notification
	refused       int
}

// callbackPath is where the VEN's receiver takes notifications.
const callbackPath = "/openadr/notifications"

func newReceiver(bearer string) *receiver {
	r := &receiver{bearer: bearer}
	r.Server = httptest.NewTLSServer(http.HandlerFunc(r.serve))
	DeferCleanup(r.Close)
	return r
}

// CallbackURL is the subscription's callbackUrl.
func (r *receiver) CallbackURL() string { return r.URL + callbackPath }

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != callbackPath {
		http.NotFound(w, req)
		return
	}
	if req.Header.Get("Authorization") != "Bearer "+r.bearer {
		r.mu.Lock()
		r.refused++
		r.mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	var n ven.Notification
	if err == nil {
		err = json.Unmarshal(body, &n)
	}
	if err != nil {
		GinkgoWriter.Printf("receiver: a notification that is not the document's: %v: %s\n", err, body)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.notifications = append(r.notifications, n)
	r.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// Events are the events the VEN was told of by operation (POST, PUT, DELETE), in the order
// they came.
func (r *receiver) Events(operation ven.NotificationOperation) []ven.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ven.Event
	for _, n := range r.notifications {
		if n.ObjectType != ven.ObjectTypesEVENT || n.Operation != operation {
			continue
		}
		// The generated union's discriminator mapping names "event", the enum "EVENT": read
		// the object as the type the notification's objectType names.
		e, err := n.Object.AsEvent()
		if err != nil {
			GinkgoWriter.Printf("receiver: an EVENT notification whose object is no event: %v\n", err)
			continue
		}
		out = append(out, e)
	}
	return out
}

// Refused counts the notifications that came without the subscription's bearer token.
func (r *receiver) Refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

package ven_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/openadr/oadrtest"
	"github.com/flexsite/flexsite/test/ven"
)

// receiver is a VEN's callback: an HTTPS server on loopback that keeps the OpenADR
// notifications it is sent with the bearer token the subscription gave, counts what came
// without it, and keeps why a body was not the document's notification.
type receiver struct {
	*httptest.Server
	bearer   string
	contract *oadrtest.Contract

	mu            sync.Mutex
	notifications []ven.Notification
	refused       int
	malformed     []string
}

// callbackPath is where the VEN's receiver takes notifications.
const callbackPath = "/openadr/notifications"

func newReceiver(bearer string) *receiver {
	GinkgoHelper()
	contract, err := oadrtest.Load(serverURL)
	Expect(err).NotTo(HaveOccurred())
	r := &receiver{bearer: bearer, contract: contract}
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
		err = r.contract.CheckSchema("notification", body)
	}
	if err == nil {
		err = json.Unmarshal(body, &n)
	}
	if err != nil {
		r.mu.Lock()
		r.malformed = append(r.malformed, fmt.Sprintf("%v: %s", err, body))
		r.mu.Unlock()
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

// Malformed are the bodies that were not the document's notification, with why.
func (r *receiver) Malformed() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.malformed)
}

// Refused counts the notifications that came without the subscription's bearer token.
func (r *receiver) Refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

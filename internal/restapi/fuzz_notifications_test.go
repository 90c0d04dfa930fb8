package restapi

import (
	"regexp"
	"slices"
	"testing"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/web"
)

// subscriptionURL is the CRD's pattern for spec.url.
var subscriptionURL = regexp.MustCompile(`^https://[^\s]+$`)

// FuzzSubscriptionBody fuzzes POST /notifications/subscriptions' body: no panic; a refusal
// is a 422 naming the body; what is accepted is storable in a Subscription (the CRD's url
// pattern and lengths; distinct event types of the enum).
func FuzzSubscriptionBody(f *testing.F) {
	for _, seed := range []string{
		`{"url":"https://hooks.example.com/flexsite"}`,
		`{"url":"https://hooks.example.com/x","events":["site.offboarded","asset.changed","asset.changed"]}`,
		`{"url":"http://hooks.example.com/"}`, `{"url":"https://"}`, `{"url":"https:// x"}`,
		`{"url":"https://user:pw@example.com/"}`, `{"url":"https://example.com/#f"}`,
		`{"url":"https://example.com/a\u0000b"}`, `{"url":"https://[::1]:8443/x"}`,
		`{"url":"https://example.com","events":"ping"}`, `{"url":"https://example.com","events":[1,null,"nope"]}`,
		`{"events":[]}`, `{"url":null}`, `[]`, `{`, `{"url":"https://a"} {}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		body, err := web.DecodeJSON(jsonRequest(data))
		if err != nil {
			checkAnswer(t, err, "body")
			return
		}
		fl := &fields{}
		raw, events := parseSubscription(fl, body)
		if err := fl.Err(); err != nil {
			checkAnswer(t, err, "body")
			return
		}
		if !subscriptionURL.MatchString(raw) || len(raw) < 9 || len(raw) > maxURL {
			t.Fatalf("url %q accepted but the CRD refuses it", raw)
		}
		if len(events) > len(flexv1.AllEventTypes) {
			t.Fatalf("%d event types accepted", len(events))
		}
		for i, e := range events {
			if !slices.Contains(flexv1.AllEventTypes, e) || slices.Contains(events[:i], e) {
				t.Fatalf("events %v accepted", events)
			}
		}
	})
}

package openadr

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app/subscriptions"
	"github.com/flexsite/flexsite/internal/app/vtn"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/web"
)

// maxSubscriptionBody bounds a subscription's body.
const maxSubscriptionBody = 64 << 10

// maxBearerToken bounds a subscription's bearer token.
const maxBearerToken = 4096

// searchSubscriptions answers the OpenADR subscriptions the caller sees (the business logic
// all of the organisation's, a VEN client its own), by id, filtered by programID, clientName
// and objects. Subscriptions target no one here: a search naming targets finds none.
func (d *Door) searchSubscriptions(r *http.Request, p *auth.Principal) (any, error) {
	s, err := parseSearch(r)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	all := vtn.BusinessLogic(p)
	listed, err := d.Subscriptions.ListOpenADR(r.Context(), p, all)
	if err != nil {
		return nil, err
	}
	var objects []flexv1.OpenADRObject
	for _, o := range q["objects"] {
		for _, part := range splitComma(o) {
			objects = append(objects, flexv1.OpenADRObject(part))
		}
	}
	found := slices.DeleteFunc(listed, func(rec subscriptions.OpenADRRecord) bool {
		return s.TargetType != "" ||
			(q.Get(fieldProgramID) != "" && rec.ProgramID != q.Get(fieldProgramID)) ||
			(q.Get("clientName") != "" && rec.ClientName != q.Get("clientName")) ||
			(len(objects) > 0 && !slices.ContainsFunc(objects, func(o flexv1.OpenADRObject) bool { return slices.Contains(rec.Objects, o) }))
	})
	out := make([]oadr.Subscription, 0, len(found))
	for _, rec := range page(found, s) {
		out = append(out, subscriptionShape(rec))
	}
	return out, nil
}

func (d *Door) getSubscription(r *http.Request, p *auth.Principal) (any, error) {
	all := vtn.BusinessLogic(p)
	rec, err := d.Subscriptions.GetOpenADR(r.Context(), p, all, r.PathValue("subscriptionID"))
	if err != nil {
		return nil, subscriptionErr(err, r)
	}
	return subscriptionShape(rec), nil
}

// createSubscription subscribes the caller to notifications (docs/openadr.md,
// "Subscriptions"): one objectOperations entry, its callbackUrl checked as the REST API checks
// a subscription's url (https, and an address any delivery may reach), its bearerToken kept in
// the subscription's Secret.
func (d *Door) createSubscription(r *http.Request, p *auth.Principal) (any, error) {
	in, err := d.readSubscriptionInput(r)
	if err != nil {
		return nil, err
	}
	rec, err := d.Subscriptions.CreateOpenADR(r.Context(), p, in)
	if err != nil {
		return nil, err
	}
	return web.WithStatus{Status: http.StatusCreated, Body: subscriptionShape(rec)}, nil
}

// updateSubscription replaces what the subscription says (the caller's own, or for the
// business logic any of the organisation's); its maker stays its owner.
func (d *Door) updateSubscription(r *http.Request, p *auth.Principal) (any, error) {
	all := vtn.BusinessLogic(p)
	id := r.PathValue("subscriptionID")
	if _, err := d.Subscriptions.GetOpenADR(r.Context(), p, all, id); err != nil {
		return nil, subscriptionErr(err, r)
	}
	in, err := d.readSubscriptionInput(r)
	if err != nil {
		return nil, err
	}
	rec, err := d.Subscriptions.UpdateOpenADR(r.Context(), p, all, id, in)
	if err != nil {
		return nil, subscriptionErr(err, r)
	}
	return subscriptionShape(rec), nil
}

func (d *Door) deleteSubscription(r *http.Request, p *auth.Principal) (any, error) {
	all := vtn.BusinessLogic(p)
	rec, err := d.Subscriptions.DeleteOpenADR(r.Context(), p, all, r.PathValue("subscriptionID"))
	if err != nil {
		return nil, subscriptionErr(err, r)
	}
	return subscriptionShape(rec), nil
}

// subscriptionErr answers the use case's not found in the document's words.
func subscriptionErr(err error, r *http.Request) error {
	if errors.Is(err, subscriptions.ErrSubscriptionNotFound) {
		return notFound("Subscription", r.PathValue("subscriptionID"))
	}
	return err
}

// subscriptionInput is the part of the document's subscription the door reads.
type subscriptionInput struct {
	ClientName       *string `json:"clientName"`
	ProgramID        *string `json:"programID"`
	ObjectOperations []struct {
		Objects     []string `json:"objects"`
		Operations  []string `json:"operations"`
		CallbackURL *string  `json:"callbackUrl"`
		BearerToken *string  `json:"bearerToken"`
	} `json:"objectOperations"`
	Targets []valuesInput `json:"targets"`
}

var (
	openADRObjects    = []string{"PROGRAM", "EVENT", "REPORT", "SUBSCRIPTION", "VEN", "RESOURCE"}
	openADROperations = []string{"READ", "CREATE", "UPDATE", "DELETE"}
)

// readSubscriptionInput reads a subscription's body; what it cannot take is a 400 problem
// naming where, and nothing is written.
func (d *Door) readSubscriptionInput(r *http.Request) (subscriptions.OpenADRInput, error) {
	var in subscriptions.OpenADRInput
	data, err := web.ReadBodyUpTo(r, maxSubscriptionBody)
	if err != nil {
		return in, err
	}
	if _, err := web.DecodeObject(data); err != nil {
		return in, err
	}
	var body subscriptionInput
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&body); err != nil {
		return in, badRequest("The body is not a subscription: %s", jsonProblem(err))
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	switch c := body.ClientName; {
	case c == nil || *c == "" || len(*c) > 128:
		bad("clientName: required, 1 to 128 characters")
	default:
		in.ClientName = *c
	}
	if body.ProgramID == nil || *body.ProgramID == "" {
		bad("programID: required (a program: %s)", propositionsText())
	} else if _, err := d.VTN.Program(r.Context(), *body.ProgramID); errors.Is(err, vtn.ErrProgramNotFound) {
		bad("programID: %q is not a program offered (%s)", *body.ProgramID, propositionsText())
	} else if err != nil {
		return in, err
	} else {
		in.ProgramID = *body.ProgramID
	}
	if len(body.Targets) > 0 {
		bad("targets: not taken (a VEN client is notified only of the events of the assets its VENs hold)")
	}
	if len(body.ObjectOperations) != 1 {
		bad("objectOperations: exactly one entry (a second callback is a second subscription)")
	} else {
		oo := body.ObjectOperations[0]
		in.Objects, in.Operations = enumList[flexv1.OpenADRObject](oo.Objects, openADRObjects, "objects", bad),
			enumList[flexv1.OpenADROperation](oo.Operations, openADROperations, "operations", bad)
		switch u := oo.CallbackURL; {
		case u == nil || *u == "":
			bad("objectOperations[0].callbackUrl: required")
		default:
			if msg := events.CheckURL(*u); msg != "" {
				bad("objectOperations[0].callbackUrl: %s", msg)
			} else if err := d.NotificationPolicy.CheckURLHost(*u); err != nil {
				bad("objectOperations[0].callbackUrl: %s", err)
			}
			in.CallbackURL = *u
		}
		if t := oo.BearerToken; t != nil {
			if len(*t) > maxBearerToken || strings.IndexFunc(*t, func(r rune) bool { return r < 0x21 || r > 0x7e }) >= 0 {
				bad("objectOperations[0].bearerToken: at most %d visible ASCII characters", maxBearerToken)
			}
			in.BearerToken = *t
		}
	}
	if len(problems) > 0 {
		return in, badRequest("%s", strings.Join(problems, "; "))
	}
	return in, nil
}

// enumList reads a non-empty list of the allowed values.
func enumList[T ~string](vs, allowed []string, name string, bad func(string, ...any)) []T {
	if len(vs) == 0 || len(vs) > len(allowed) {
		bad("objectOperations[0].%s: 1 to %d of %s", name, len(allowed), strings.Join(allowed, ", "))
		return nil
	}
	out := make([]T, 0, len(vs))
	for i, v := range vs {
		if !slices.Contains(allowed, v) {
			bad("objectOperations[0].%s[%d]: one of %s", name, i, strings.Join(allowed, ", "))
			continue
		}
		out = append(out, T(v))
	}
	return out
}

// subscriptionShape is an OpenADR subscription as the document's subscription. Its bearer
// token is never answered.
func subscriptionShape(rec subscriptions.OpenADRRecord) oadr.Subscription {
	raw, _ := json.Marshal(map[string]any{
		"id": rec.ID, "objectType": "SUBSCRIPTION", "clientName": rec.ClientName, fieldProgramID: rec.ProgramID,
		"createdDateTime": rec.Created.UTC(), "modificationDateTime": rec.Modified.UTC(),
		"objectOperations": []any{map[string]any{"objects": rec.Objects, "operations": rec.Operations,
			"callbackUrl": rec.CallbackURL}},
	})
	var out oadr.Subscription
	_ = json.Unmarshal(raw, &out)
	return out
}

// Notification is the document's notification of the outbox event ev (dispatch.requested:
// POST; dispatch.cancelled: DELETE) for the OpenADR subscription sub: the event as GET
// /events/{id} answers it (EventShape), and its targets. send is false when there is nothing to
// send: an event of another program, or one the subscription's maker does not see.
func (d *Door) Notification(ctx context.Context, sub *flexv1.Subscription, ev *events.Event) (body []byte, send bool, err error) {
	var operation oadr.NotificationOperation
	switch ev.Type {
	case flexv1.EventDispatchRequested:
		operation = "POST"
	case flexv1.EventDispatchCancelled:
		operation = "DELETE"
	default:
		return nil, false, nil
	}
	var data struct {
		EventID string `json:"event_id"`
	}
	if err := json.Unmarshal([]byte(ev.Data), &data); err != nil {
		return nil, false, nil //nolint:nilerr // not a dispatch's event: nothing to say
	}
	e, err := d.VTN.AnyEvent(ctx, sub.Namespace, data.EventID)
	if errors.Is(err, vtn.ErrEventNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if !sub.Spec.IsOpenADR() || e.Proposition != sub.Spec.OpenADR.ProgramID {
		return nil, false, nil
	}
	sees, err := d.VTN.SeesAssetAs(ctx, sub.Namespace, sub.Spec.OpenADR.APIClient, e.AssetID)
	if err != nil {
		return nil, false, err
	}
	if !sees {
		return nil, false, nil
	}
	body, err = eventNotification(operation, EventShape(e))
	return body, err == nil, err
}

// eventNotification is the document's notification of operation on the event shape.
func eventNotification(operation oadr.NotificationOperation, shape oadr.Event) ([]byte, error) {
	object, err := json.Marshal(shape)
	if err != nil {
		return nil, err
	}
	n := oadr.Notification{ObjectType: oadr.ObjectTypesEVENT, Operation: operation, Targets: shape.Targets}
	if err := n.Object.UnmarshalJSON(object); err != nil {
		return nil, err
	}
	return json.Marshal(n)
}

package subscriptions

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
)

// BearerTokenKey is the key of an OpenADR subscription's Secret that holds its bearer token.
const BearerTokenKey = "bearerToken"

// OpenADRInput is an OpenADR subscription as the OpenADR door reads it (docs/openadr.md,
// "Subscriptions"): its callback URL is checked by the door as the REST API checks a URL.
type OpenADRInput struct {
	ClientName, ProgramID string
	Objects               []flexv1.OpenADRObject
	Operations            []flexv1.OpenADROperation
	CallbackURL           string
	// BearerToken is sent as Authorization: Bearer with each notification ("": none). It is
	// kept in the subscription's Secret only, and never answered.
	BearerToken string
}

// OpenADRRecord is an OpenADR subscription as answered (no bearer token, no signing secret).
type OpenADRRecord struct {
	ID                    string
	Created, Modified     time.Time
	ClientName, ProgramID string
	Objects               []flexv1.OpenADRObject
	Operations            []flexv1.OpenADROperation
	CallbackURL           string
}

// CreateOpenADR subscribes p's API client to the OpenADR notifications in: one Subscription
// of the organisation (the same cap, outbox, delivery, address rules and order per site as any),
// of the event types in's objects and operations map onto, and a Secret holding its signing
// secret and bearer token.
func (s *Service) CreateOpenADR(ctx context.Context, p *auth.Principal, in OpenADRInput) (OpenADRRecord, error) {
	secret, err := newSigningSecret()
	if err != nil {
		return OpenADRRecord{}, err
	}
	data := map[string][]byte{signingSecretKey: []byte(secret)}
	spec := openADRSpec(p, in)
	if in.BearerToken != "" {
		data[BearerTokenKey] = []byte(in.BearerToken)
		spec.OpenADR.BearerTokenKey = BearerTokenKey
	}
	sub, err := s.create(ctx, p, spec, data)
	if err != nil {
		return OpenADRRecord{}, err
	}
	return openADRRecord(sub), nil
}

func openADRSpec(p *auth.Principal, in OpenADRInput) flexv1.SubscriptionSpec {
	o := flexv1.OpenADRSubscription{ClientName: in.ClientName, ProgramID: in.ProgramID,
		Objects:    slices.Compact(slices.Sorted(slices.Values(in.Objects))),
		Operations: slices.Compact(slices.Sorted(slices.Values(in.Operations))), APIClient: p.ClientName}
	return flexv1.SubscriptionSpec{URL: in.CallbackURL, Events: o.OpenADREventTypes(), OpenADR: o}
}

// ListOpenADR answers the organisation's OpenADR subscriptions p sees, by id: all of them for
// the business logic (all), a VEN client's own otherwise. The organisation's subscriptions are
// capped (validation.DefaultMaxSubscriptions), so the cache's list is bounded.
func (s *Service) ListOpenADR(ctx context.Context, p *auth.Principal, all bool) ([]OpenADRRecord, error) {
	list := &flexv1.SubscriptionList{}
	if err := s.Cache.List(ctx, list, client.InNamespace(p.Namespace)); err != nil {
		return nil, err
	}
	out := []OpenADRRecord{}
	for i := range list.Items {
		sub := &list.Items[i]
		if sub.DeletionTimestamp.IsZero() && sees(p, all, sub) {
			out = append(out, openADRRecord(sub))
		}
	}
	slices.SortFunc(out, func(a, b OpenADRRecord) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// sees tells whether p sees the OpenADR subscription sub.
func sees(p *auth.Principal, all bool, sub *flexv1.Subscription) bool {
	return sub.Spec.IsOpenADR() && (all || sub.Spec.OpenADR.APIClient == p.ClientName)
}

// openADROf reads the organisation's OpenADR subscription id that p sees (not found otherwise).
func (s *Service) openADROf(ctx context.Context, p *auth.Principal, all bool, id string, fresh bool) (*flexv1.Subscription, error) {
	sub, err := s.subscriptionOf(ctx, p, id, fresh)
	if err != nil {
		return nil, err
	}
	if !sees(p, all, sub) {
		return nil, ErrSubscriptionNotFound
	}
	return sub, nil
}

// GetOpenADR answers the OpenADR subscription id p sees.
func (s *Service) GetOpenADR(ctx context.Context, p *auth.Principal, all bool, id string) (OpenADRRecord, error) {
	sub, err := s.openADROf(ctx, p, all, id, false)
	if err != nil {
		return OpenADRRecord{}, err
	}
	return openADRRecord(sub), nil
}

// UpdateOpenADR replaces what the OpenADR subscription id says (its maker stays its owner):
// its Secret's bearer token first, then the Subscription, guarded by the version read.
func (s *Service) UpdateOpenADR(ctx context.Context, p *auth.Principal, all bool, id string, in OpenADRInput) (OpenADRRecord, error) {
	sub, err := s.openADROf(ctx, p, all, id, true)
	if err != nil {
		return OpenADRRecord{}, err
	}
	owner := &auth.Principal{ClientName: sub.Spec.OpenADR.APIClient}
	spec := openADRSpec(owner, in)
	spec.SecretRef, spec.Paused = sub.Spec.SecretRef, sub.Spec.Paused
	sec := &corev1.Secret{}
	if err := s.APIReader.Get(ctx, types.NamespacedName{Namespace: sub.Namespace, Name: sub.Spec.SecretRef.Name}, sec); err != nil {
		return OpenADRRecord{}, err
	}
	if in.BearerToken != "" {
		if sec.Data == nil {
			sec.Data = map[string][]byte{}
		}
		sec.Data[BearerTokenKey] = []byte(in.BearerToken)
		spec.OpenADR.BearerTokenKey = BearerTokenKey
	} else {
		delete(sec.Data, BearerTokenKey)
	}
	if err := s.Client.Update(ctx, sec); err != nil {
		return OpenADRRecord{}, err
	}
	sub.Spec = spec
	if err := s.Client.Update(ctx, sub); err != nil {
		return OpenADRRecord{}, err
	}
	return openADRRecord(sub), nil
}

// DeleteOpenADR deletes the OpenADR subscription id p sees, and its Secret, and answers it as
// it was.
func (s *Service) DeleteOpenADR(ctx context.Context, p *auth.Principal, all bool, id string) (OpenADRRecord, error) {
	sub, err := s.openADROf(ctx, p, all, id, true)
	if err != nil {
		return OpenADRRecord{}, err
	}
	if err := s.Delete(ctx, p, id); err != nil {
		return OpenADRRecord{}, err
	}
	return openADRRecord(sub), nil
}

func openADRRecord(sub *flexv1.Subscription) OpenADRRecord {
	o := sub.Spec.OpenADR
	modified := sub.CreationTimestamp.Time
	for _, m := range sub.ManagedFields {
		if m.Time != nil && m.Time.After(modified) {
			modified = m.Time.Time
		}
	}
	return OpenADRRecord{ID: sub.Name, Created: sub.CreationTimestamp.Time, Modified: modified, ClientName: o.ClientName,
		ProgramID: o.ProgramID, Objects: slices.Clone(o.Objects), Operations: slices.Clone(o.Operations),
		CallbackURL: sub.Spec.URL}
}

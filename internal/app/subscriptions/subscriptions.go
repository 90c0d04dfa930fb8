// Package subscriptions holds the use cases of an organisation's notification subscriptions
// (docs/notifications.md, "Subscribe"): subscribing a URL, its signing secret (shown once, kept
// only in a Secret), listing, deleting, a test ping (written to the outbox in PostgreSQL, delivered
// like any event) and the recent deliveries (the outbox's log of attempts). Delivery itself is
// internal/delivery's. It speaks no HTTP.
package subscriptions

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/outboxstore"
	"github.com/flexsite/flexsite/internal/record"
	"github.com/flexsite/flexsite/internal/validation"
)

// Service runs the subscription use cases on the household use cases' readers and writer
// (whose writes carry the caller's field manager).
type Service struct {
	Cache, APIReader client.Reader
	Client           client.Client
	// Outbox is the notification outbox (required).
	Outbox *outboxstore.Store
	// MaxSubscriptions is how many subscriptions an organisation may have (0:
	// validation.DefaultMaxSubscriptions); the Subscription admission webhook holds kubectl
	// and GitOps to the same number.
	MaxSubscriptions int
}

// New builds the subscription use cases on the household ones' clients and the outbox
// (required: events, pings and the delivery log are the database's).
func New(households *app.Service, outbox *outboxstore.Store) *Service {
	if outbox == nil {
		panic("subscriptions.New: the outbox is required")
	}
	return &Service{Cache: households.Cache, APIReader: households.APIReader, Client: households.Client, Outbox: outbox}
}

// SubscriptionCreated is a new subscription: the one answer that carries the signing secret.
type SubscriptionCreated struct {
	ID        string             `json:"id"`
	URL       string             `json:"url"`
	Events    []flexv1.EventType `json:"events"`
	Secret    string             `json:"secret"`
	CreatedAt string             `json:"created_at"`
}

// DeliveryRecord is a subscription's last delivery.
type DeliveryRecord struct {
	At         string `json:"at"`
	StatusCode *int32 `json:"status_code"`
	LatencyMS  int64  `json:"latency_ms"`
}

// SubscriptionRecord is a subscription as listed and read (no secret).
type SubscriptionRecord struct {
	ID                  string             `json:"id"`
	URL                 string             `json:"url"`
	Events              []flexv1.EventType `json:"events"`
	Paused              bool               `json:"paused"`
	LastDelivery        *DeliveryRecord    `json:"last_delivery"`
	ConsecutiveFailures int32              `json:"consecutive_failures"`
}

// SubscriptionList is the organisation's subscriptions.
type SubscriptionList struct {
	Subscriptions []SubscriptionRecord `json:"subscriptions"`
}

// DeliveryAttemptRecord is one recent delivery attempt.
type DeliveryAttemptRecord struct {
	EventID    string           `json:"event_id"`
	Type       flexv1.EventType `json:"type"`
	Attempt    int32            `json:"attempt"`
	StatusCode *int32           `json:"status_code"`
	Error      *string          `json:"error"`
	At         string           `json:"at"`
	LatencyMS  int64            `json:"latency_ms"`
}

// DeliveryList is a subscription's recent delivery attempts, newest first.
type DeliveryList struct {
	Deliveries []DeliveryAttemptRecord `json:"deliveries"`
}

// TestAccepted is the ping a test delivery sends.
type TestAccepted struct {
	EventID string `json:"event_id"`
}

// signingSecretKey is the key of a subscription's Secret holding its signing secret.
const signingSecretKey = "secret"

const (
	// secretBytes is the signing secret's length (docs/notifications.md, "Subscribe").
	secretBytes = 32
)

// ErrSubscriptionNotFound answers a subscription that does not exist for this caller.
var ErrSubscriptionNotFound = app.Fail(app.NotFound, "Subscription not found or not authorized")

// ErrOutboxUnavailable answers a ping or a delivery log the database could not take or give
// now (nothing was written).
var ErrOutboxUnavailable = &app.Error{Kind: app.Unavailable,
	Detail: "The notification outbox is unavailable; try again shortly", RetryAfter: db.RetryAfterSeconds}

// outboxErr is err, with the database unavailable answered as ErrOutboxUnavailable.
func outboxErr(err error) error {
	if db.Unavailable(err) {
		return ErrOutboxUnavailable
	}
	return err
}

// subscriptionName: a subscription's id is its object name (a UUID for those made here; any
// name for those declared with kubectl or GitOps).
var subscriptionName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

// SubscriptionSecretName is the Secret that holds subscription id's signing secret.
func SubscriptionSecretName(id string) string { return "subscription-" + id }

// Create subscribes url (checked by the door) to the organisation's events of
// the given types (none: every type). The signing secret is made here, kept in a Secret the
// Subscription owns, and answered this once.
func (s *Service) Create(ctx context.Context, p *auth.Principal, url string, wanted []flexv1.EventType) (SubscriptionCreated, error) {
	secret, err := newSigningSecret()
	if err != nil {
		return SubscriptionCreated{}, err
	}
	sub, err := s.create(ctx, p, flexv1.SubscriptionSpec{URL: url, Events: wanted},
		map[string][]byte{signingSecretKey: []byte(secret)})
	if err != nil {
		return SubscriptionCreated{}, err
	}
	return SubscriptionCreated{ID: sub.Name, URL: url, Events: record.NonNil(wanted), Secret: secret,
		CreatedAt: sub.CreationTimestamp.UTC().Format(time.RFC3339)}, nil
}

// newSigningSecret is a new signing secret: whsec_ and the base64 of secretBytes random bytes.
func newSigningSecret() (string, error) {
	key := make([]byte, secretBytes)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key), nil
}

// create makes a Subscription of spec (its secretRef set here) and the Secret holding data
// that it owns, within the organisation's cap. Secret data never enters the Subscription.
func (s *Service) create(ctx context.Context, p *auth.Principal, spec flexv1.SubscriptionSpec,
	data map[string][]byte) (*flexv1.Subscription, error) {
	if err := s.room(ctx, p.Namespace); err != nil {
		return nil, err
	}
	id := uuid.NewString()
	spec.SecretRef = flexv1.SecretKeyReference{Name: SubscriptionSecretName(id), Key: signingSecretKey}
	sub := &flexv1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: id}, Spec: spec}
	if err := s.Client.Create(ctx, sub); err != nil {
		return nil, capRefused(err)
	}
	// The Secret belongs to the Subscription (garbage-collected with it; deleted with it here).
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: SubscriptionSecretName(id),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: flexv1.GroupVersion.String(), Kind: "Subscription",
				Name: sub.Name, UID: sub.UID}}},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	if err := s.Client.Create(ctx, sec); err != nil {
		_ = s.Client.Delete(context.WithoutCancel(ctx), sub)
		return nil, err
	}
	return sub, nil
}

// room refuses another subscription (409) to an organisation that has as many as it may
// (householdstore.SubscriptionRoom, counted in the manager's cache).
func (s *Service) room(ctx context.Context, namespace string) error {
	maxSubs := s.MaxSubscriptions
	if maxSubs <= 0 {
		maxSubs = validation.DefaultMaxSubscriptions
	}
	err := householdstore.SubscriptionRoom(ctx, s.Cache, namespace, maxSubs)
	var full *validation.Error
	if errors.As(err, &full) {
		return app.Fail(app.Conflict, "%s", full.Msg)
	}
	return err
}

// capRefused answers the Subscription admission webhook's refusal of a create (Forbidden: the
// cap reached, seen by another replica's cache a moment before this one's) as room does: 409
// with the webhook's sentence. Any other error is left as it is.
func capRefused(err error) error {
	if !apierrors.IsForbidden(err) {
		return err
	}
	const said = "is forbidden: "
	msg := err.Error()
	i := strings.LastIndex(msg, said)
	if i < 0 || !strings.Contains(msg, "notification subscriptions") {
		return err
	}
	return app.Fail(app.Conflict, "%s", msg[i+len(said):])
}

// List is the organisation's live subscriptions, by id.
func (s *Service) List(ctx context.Context, p *auth.Principal) (SubscriptionList, error) {
	list := &flexv1.SubscriptionList{}
	if err := s.Cache.List(ctx, list, client.InNamespace(p.Namespace)); err != nil {
		return SubscriptionList{}, err
	}
	out := SubscriptionList{Subscriptions: make([]SubscriptionRecord, 0, len(list.Items))}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			out.Subscriptions = append(out.Subscriptions, subscriptionRecord(&list.Items[i]))
		}
	}
	slices.SortFunc(out.Subscriptions, func(a, b SubscriptionRecord) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

func subscriptionRecord(sub *flexv1.Subscription) SubscriptionRecord {
	rec := SubscriptionRecord{ID: sub.Name, URL: sub.Spec.URL, Events: record.NonNil(sub.Spec.Events), Paused: sub.Spec.Paused,
		ConsecutiveFailures: sub.Status.ConsecutiveFailures}
	if d := sub.Status.LastDelivery; d != nil {
		rec.LastDelivery = &DeliveryRecord{At: d.Time.UTC().Format(time.RFC3339), StatusCode: statusCode(d.StatusCode),
			LatencyMS: d.LatencyMillis}
	}
	return rec
}

func statusCode(c int32) *int32 {
	if c == 0 {
		return nil
	}
	return &c
}

// subscriptionOf reads the organisation's subscription id (not found for any other).
func (s *Service) subscriptionOf(ctx context.Context, p *auth.Principal, id string, fresh bool) (*flexv1.Subscription, error) {
	if !subscriptionName.MatchString(id) {
		return nil, ErrSubscriptionNotFound
	}
	sub := &flexv1.Subscription{}
	reader := s.Cache
	if fresh {
		reader = s.APIReader
	}
	err := reader.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: id}, sub)
	if apierrors.IsNotFound(err) || (err == nil && !sub.DeletionTimestamp.IsZero()) {
		return nil, ErrSubscriptionNotFound
	}
	return sub, err
}

// Get is the organisation's subscription id (no secret).
func (s *Service) Get(ctx context.Context, p *auth.Principal, id string) (SubscriptionRecord, error) {
	sub, err := s.subscriptionOf(ctx, p, id, false)
	if err != nil {
		return SubscriptionRecord{}, err
	}
	return subscriptionRecord(sub), nil
}

// Delete deletes the subscription and its signing secret.
func (s *Service) Delete(ctx context.Context, p *auth.Principal, id string) error {
	sub, err := s.subscriptionOf(ctx, p, id, true)
	if err != nil {
		return err
	}
	if err := s.Client.Delete(ctx, sub); client.IgnoreNotFound(err) != nil {
		return err
	}
	// The Secret made with it goes with it (envtest and some clusters have no garbage collector).
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: SubscriptionSecretName(sub.Name)}}
	if sub.Spec.SecretRef.Name == sec.Name {
		if err := s.Client.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// Test writes a ping to the outbox, addressed to the subscription alone (delivered like any
// event, and listed in its deliveries).
func (s *Service) Test(ctx context.Context, p *auth.Principal, id string) (TestAccepted, error) {
	sub, err := s.subscriptionOf(ctx, p, id, true)
	if err != nil {
		return TestAccepted{}, err
	}
	ev := events.Stamp(events.Ping(), time.Now())
	if err := s.Outbox.Ping(ctx, p.Namespace, string(sub.UID), ev); err != nil {
		return TestAccepted{}, outboxErr(err)
	}
	return TestAccepted{EventID: ev.ID}, nil
}

// Deliveries is the subscription's most recent delivery attempts (at most limit), newest
// first, from the outbox's log (every replica's attempts).
func (s *Service) Deliveries(ctx context.Context, p *auth.Principal, id string, limit int) (DeliveryList, error) {
	sub, err := s.subscriptionOf(ctx, p, id, false)
	if err != nil {
		return DeliveryList{}, err
	}
	recent, err := s.Outbox.Attempts(ctx, string(sub.UID), limit)
	if err != nil {
		return DeliveryList{}, outboxErr(err)
	}
	out := DeliveryList{Deliveries: make([]DeliveryAttemptRecord, 0, len(recent))}
	for _, a := range recent {
		rec := DeliveryAttemptRecord{EventID: a.EventID, Type: a.Type, Attempt: int32(min(a.Attempt, 1<<30)), //nolint:gosec // bounded
			StatusCode: statusCode(int32(a.StatusCode)), //nolint:gosec // an HTTP status
			At:         a.At.UTC().Format(time.RFC3339), LatencyMS: a.Latency.Milliseconds()}
		if a.Error != "" {
			e := events.PublicDeliveryError(a.Error)
			rec.Error = &e
		}
		out.Deliveries = append(out.Deliveries, rec)
	}
	return out, nil
}

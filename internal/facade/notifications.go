package facade

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kretry "k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/notify"
)

// The notification endpoints (notifications.md): an organisation's Subscriptions, their
// signing secrets (shown once, kept only in a Secret) and their delivery state. Delivery
// itself is internal/notifier's; this door only maps requests onto Subscriptions.

// SubscriptionCreated answers POST /notifications/subscriptions: the one answer that
// carries the signing secret.
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

// SubscriptionList answers GET /notifications/subscriptions.
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

// DeliveryList answers GET /notifications/subscriptions/{id}/deliveries.
type DeliveryList struct {
	Deliveries []DeliveryAttemptRecord `json:"deliveries"`
}

// TestAccepted answers POST /notifications/subscriptions/{id}/test.
type TestAccepted struct {
	EventID string `json:"event_id"`
}

// withStatus answers body with a status other than 200.
type withStatus struct {
	status int
	body   any
}

const (
	subscriptionsRoute = "/notifications/subscriptions"
	subscriptionRoute  = subscriptionsRoute + "/{subscription_id}"
	// secretBytes is the signing secret's length (notifications.md: 24 to 64 random bytes).
	secretBytes = 32
	// maxURL bounds a subscription's url (as the CRD does).
	maxURL = 2048
)

var errSubscriptionNotFound = fail(http.StatusNotFound, "Subscription not found or not authorized")

// subscriptionName: a subscription's id is its object name (a UUID for those made here; any
// name for those declared with kubectl or GitOps).
var subscriptionName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

func (s *Server) createSubscription(r *http.Request, p *auth.Principal) (any, error) {
	body, err := decodeJSON(r)
	if err != nil {
		return nil, err
	}
	f := &fields{}
	raw, events := parseSubscription(f, body)
	if err := f.err(); err != nil {
		return nil, err
	}

	key := make([]byte, secretBytes)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	id := uuid.NewString()
	ctx := r.Context()
	sub := &flexv1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: id},
		Spec: flexv1.SubscriptionSpec{URL: raw, Events: events,
			SecretRef: flexv1.SecretKeyReference{Name: secretNameOf(id), Key: "secret"}},
	}
	if err := s.Client.Create(ctx, sub); err != nil {
		return nil, err
	}
	// The Secret belongs to the Subscription (garbage-collected with it; deleted with it here).
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: secretNameOf(id),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: flexv1.GroupVersion.String(), Kind: "Subscription",
				Name: sub.Name, UID: sub.UID}}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"secret": []byte(secret)},
	}
	if err := s.Client.Create(ctx, sec); err != nil {
		_ = s.Client.Delete(context.WithoutCancel(ctx), sub)
		return nil, err
	}
	return withStatus{status: http.StatusCreated, body: SubscriptionCreated{ID: id, URL: raw,
		Events: nonNil(events), Secret: secret, CreatedAt: sub.CreationTimestamp.UTC().Format(time.RFC3339)}}, nil
}

// parseSubscription reads a subscription request: an https url and distinct event types.
func parseSubscription(f *fields, body map[string]any) (string, []flexv1.EventType) {
	loc := []any{"body"}
	raw, _ := f.str(body, loc, "url", true)
	if raw != "" {
		if msg := checkURL(raw); msg != "" {
			f.add(msg, "value_error", at(loc, "url"))
		}
	}
	var events []flexv1.EventType
	if list, ok := f.array(body, loc, "events", false); ok {
		for i, v := range list {
			if t, ok := enumValue(f, v, at(at(loc, "events"), i), flexv1.AllEventTypes); ok && !slices.Contains(events, t) {
				events = append(events, t)
			}
		}
	}
	return raw, events
}

func secretNameOf(id string) string { return "subscription-" + id }

// checkURL answers why a subscription url is refused, or "" (the address itself is checked
// at every delivery, on the resolved address).
func checkURL(raw string) string {
	if len(raw) > maxURL {
		return "URL is too long"
	}
	if strings.IndexFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return "URL must not contain spaces or control characters"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || u.Hostname() == "":
		return "URL is not valid"
	case u.Scheme != "https":
		return "URL must use https"
	case u.User != nil:
		return "URL must not carry credentials"
	case u.Fragment != "":
		return "URL must not have a fragment"
	}
	return ""
}

func (s *Server) listSubscriptions(r *http.Request, p *auth.Principal) (any, error) {
	list := &flexv1.SubscriptionList{}
	if err := s.Cache.List(r.Context(), list, client.InNamespace(p.Namespace)); err != nil {
		return nil, err
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
	rec := SubscriptionRecord{ID: sub.Name, URL: sub.Spec.URL, Events: nonNil(sub.Spec.Events), Paused: sub.Spec.Paused,
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

// subscriptionOf reads the organisation's subscription named by the path (404 for any other).
func (s *Server) subscriptionOf(r *http.Request, p *auth.Principal, fresh bool) (*flexv1.Subscription, error) {
	id := r.PathValue("subscription_id")
	if !subscriptionName.MatchString(id) {
		return nil, errSubscriptionNotFound
	}
	sub := &flexv1.Subscription{}
	reader := s.Cache
	if fresh {
		reader = s.APIReader
	}
	err := reader.Get(r.Context(), types.NamespacedName{Namespace: p.Namespace, Name: id}, sub)
	if apierrors.IsNotFound(err) || (err == nil && !sub.DeletionTimestamp.IsZero()) {
		return nil, errSubscriptionNotFound
	}
	return sub, err
}

func (s *Server) getSubscription(r *http.Request, p *auth.Principal) (any, error) {
	sub, err := s.subscriptionOf(r, p, false)
	if err != nil {
		return nil, err
	}
	return subscriptionRecord(sub), nil
}

func (s *Server) deleteSubscription(r *http.Request, p *auth.Principal) (any, error) {
	sub, err := s.subscriptionOf(r, p, true)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	if err := s.Client.Delete(ctx, sub); client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	// The Secret made with it goes with it (envtest and some clusters have no garbage collector).
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: secretNameOf(sub.Name)}}
	if sub.Spec.SecretRef.Name == sec.Name {
		if err := s.Client.Delete(ctx, sec); client.IgnoreNotFound(err) != nil {
			return nil, err
		}
	}
	return noContent{}, nil
}

// testSubscription records a ping in the subscription's own outbox (delivered like any event).
func (s *Server) testSubscription(r *http.Request, p *auth.Principal) (any, error) {
	var id string
	err := kretry.RetryOnConflict(kretry.DefaultRetry, func() error {
		sub, err := s.subscriptionOf(r, p, true)
		if err != nil {
			return err
		}
		base := sub.DeepCopy()
		ev := notify.Stamp(notify.Ping(), time.Now())
		id = ev.ID
		pending := append(slices.Clone(sub.Status.PendingEvents), ev)
		if over := len(pending) - maxPings; over > 0 {
			pending = pending[over:] // the newest pings stand for the older ones
		}
		sub.Status.PendingEvents = pending
		return s.Client.Status().Patch(r.Context(), sub, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return nil, err
	}
	return withStatus{status: http.StatusAccepted, body: TestAccepted{EventID: id}}, nil
}

// maxPings bounds a subscription's outbox of pings (status.pendingEvents, MaxItems=4).
const maxPings = 4

func (s *Server) subscriptionDeliveries(r *http.Request, p *auth.Principal) (any, error) {
	f := &fields{}
	limit := f.queryInt(r.URL.Query(), "limit", 20, 1, 20)
	if err := f.err(); err != nil {
		return nil, err
	}
	sub, err := s.subscriptionOf(r, p, false)
	if err != nil {
		return nil, err
	}
	recent := sub.Status.RecentDeliveries
	if len(recent) > limit {
		recent = recent[:limit]
	}
	out := DeliveryList{Deliveries: make([]DeliveryAttemptRecord, 0, len(recent))}
	for _, a := range recent {
		rec := DeliveryAttemptRecord{EventID: a.EventID, Type: a.Type, Attempt: a.Attempt, StatusCode: statusCode(a.StatusCode),
			At: a.Time.UTC().Format(time.RFC3339), LatencyMS: a.LatencyMillis}
		if a.Error != "" {
			e := a.Error
			rec.Error = &e
		}
		out.Deliveries = append(out.Deliveries, rec)
	}
	return out, nil
}

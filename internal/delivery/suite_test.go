package delivery_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/delivery"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/outboxstore"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/testenv"
)

var (
	env       *testenv.Env
	k8sClient client.Client
	suiteCtx  context.Context
	cancel    context.CancelFunc
	// roots trusts every receiver's certificate (httptest's TLS servers share one).
	roots *x509.CertPool
	// stopManager stops the running manager and waits for it.
	stopManager func()
	// apiServer serves the REST API of the running manager.
	apiServer *httptest.Server
	serverNow atomic.Pointer[server.Server]
	keys      *auth.KeyRing
	// testDB is the suite's PostgreSQL database.
	testDB *dbtest.Database
	// deliverer is the running manager's deliverer (the last one started).
	deliverer atomic.Pointer[delivery.Deliverer]
)

const keysNamespace = "flexsite-system"

func TestNotifier(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Notifier Suite (envtest)")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	suiteCtx, cancel = context.WithCancel(context.Background())
	var err error
	env, err = testenv.Start(suiteCtx)
	Expect(err).NotTo(HaveOccurred())
	k8sClient = env.Client

	Expect(k8sClient.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keysNamespace}})).To(Succeed())
	apiServer = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		serverNow.Load().ServeHTTP(w, r)
	}))
	DeferCleanup(apiServer.Close)

	probe := httptest.NewTLSServer(http.NotFoundHandler())
	roots = x509.NewCertPool()
	roots.AddCert(probe.Certificate())
	probe.Close()

	// A real PostgreSQL: reward credits are told from its outbox.
	if err := dbtest.Available(); err != nil {
		if fail, msg := dbtest.MissingVerdict(err); fail {
			Fail(msg)
		} else {
			Skip(msg)
		}
	}
	testDB, err = dbtest.New(suiteCtx)
	Expect(err).NotTo(HaveOccurred())

	startManager()
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
})

var _ = AfterSuite(func() {
	if stopManager != nil {
		stopManager()
	}
	if testDB != nil {
		testDB.Close(context.Background())
	}
	cancel()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

// testSchedule retries within moments so that tests do not wait minutes; the horizon is
// long enough that nothing is dropped unless a test asks.
var testSchedule = events.Schedule{Steps: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}, Horizon: time.Hour}

// testLease is how long a claimed delivery is a deliverer's here: a deliverer stopped
// mid-delivery (a crash) leaves its claims to expire this soon.
const testLease = 2 * time.Second

// startManager runs the controllers, with leader election (a Lease), so that a second manager
// started beside it is a standby for them, and a deliverer that may reach loopback only: every
// manager's deliverer delivers (no leader election), from the one outbox.
func startManager() {
	mgr, err := env.NewManager(func(o *ctrl.Options) {
		// A restarted manager registers the same controllers again.
		o.Controller.SkipNameValidation = ptr.To(true)
		o.LeaderElection, o.LeaderElectionID, o.LeaderElectionNamespace = true, "notifier-test", keysNamespace
		o.LeaderElectionReleaseOnCancel = true
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = ptr.To(4*time.Second), ptr.To(3*time.Second), ptr.To(200*time.Millisecond)
	})
	Expect(err).NotTo(HaveOccurred())
	Expect(controllers.SetupWithManager(suiteCtx, mgr, controllers.Options{DB: testDB.Pool})).To(Succeed())
	d := &delivery.Deliverer{
		Store:    &outboxstore.Store{Pool: testDB.Pool},
		Policy:   events.AddressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		RootCAs:  roots,
		Schedule: testSchedule,
		Interval: 100 * time.Millisecond,
		Lease:    testLease,
		// A new subscription's missing Secret is waited for this long, then a failure.
		SecretGrace: 3 * time.Second,
	}
	Expect(d.SetupWithManager(suiteCtx, mgr)).To(Succeed())
	deliverer.Store(d)
	keys = auth.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), keysNamespace, "flexsite-token-keys")
	Expect(keys.Ensure(suiteCtx)).To(Succeed())
	serverNow.Store(server.NewServer(server.Config{
		Log: ctrl.Log.WithName("api"), Cache: mgr.GetCache(), APIReader: mgr.GetAPIReader(), Client: mgr.GetClient(),
		Issuer: auth.NewIssuer(keys, time.Now), Authenticator: auth.NewAuthenticator(mgr.GetCache(), mgr.GetAPIReader()),
		NotificationPolicy: d.Policy, // the deliverer's: the receivers here are on loopback
		DB:                 testDB.Pool,
	}))
	// OpenADR subscriptions' notifications are shaped by the server's OpenADR door.
	d.OpenADR = serverNow.Load().OpenADRNotifications()
	ctx, stop := context.WithCancel(suiteCtx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	stopManager = func() {
		stop()
		<-done
	}
}

// received is one request a receiver got.
type received struct {
	ID, Type, Timestamp string
	Data                map[string]any
	Verified            bool
	Status              int
}

// receiver is an HTTPS receiver on loopback that verifies every request with the Standard
// Webhooks library and answers with the status its policy says.
type receiver struct {
	*httptest.Server
	secret string
	wh     *standardwebhooks.Webhook
	mu     sync.Mutex
	got    []received
	// answer decides the status of the n-th request (from 0); 204 when nil. hold (0) holds the
	// request, once recorded, until released closes or the caller gives up.
	answer   func(n int) int
	released chan struct{}
	// abandoned counts the held requests whose sender went away before they were released.
	abandoned int
	// isDown: the receiver's address refuses connections (down, until up).
	isDown bool
}

// hold is the answer that holds a request without answering it.
const hold = 0

// goDown is the answer that takes the receiver down on this request: it is not answered, every
// open connection is cut and its address refuses connections until up.
const goDown = -1

// newReceiver starts a receiver; given a channel, it hangs on every request until the channel
// closes (a dead receiver).
func newReceiver(hang ...chan struct{}) *receiver {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	r := &receiver{secret: "whsec_" + base64.StdEncoding.EncodeToString(key), released: make(chan struct{})}
	r.setSecret(r.secret)
	r.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if len(hang) > 0 {
			select {
			case <-hang[0]:
			case <-req.Context().Done():
			}
			return
		}
		body, _ := io.ReadAll(req.Body)
		var ev struct {
			Type, ID, Timestamp string
			Data                map[string]any
		}
		_ = json.Unmarshal(body, &ev)
		r.mu.Lock()
		wh := r.wh
		r.mu.Unlock()
		rec := received{ID: req.Header.Get("webhook-id"), Type: ev.Type, Timestamp: ev.Timestamp, Data: ev.Data,
			Verified: wh.Verify(body, req.Header) == nil && ev.ID == req.Header.Get("webhook-id") &&
				req.Header.Get("content-type") == "application/json"}
		r.mu.Lock()
		rec.Status = http.StatusNoContent
		if r.answer != nil {
			rec.Status = r.answer(len(r.got))
		}
		r.got = append(r.got, rec)
		r.mu.Unlock()
		switch rec.Status {
		case hold:
			select {
			case <-r.released:
			case <-req.Context().Done():
				r.mu.Lock()
				r.abandoned++
				r.mu.Unlock()
			}
			return
		case goDown:
			r.down()
			return
		}
		w.WriteHeader(rec.Status)
	}))
	DeferCleanup(r.Close)
	DeferCleanup(r.release)
	return r
}

// release lets the requests held (hold) go.
func (r *receiver) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.released:
	default:
		close(r.released)
	}
}

// down makes the receiver's address refuse connections and cuts those open (requests in
// flight get no answer).
func (r *receiver) down() {
	r.mu.Lock()
	if r.isDown {
		r.mu.Unlock()
		return
	}
	r.isDown = true
	r.mu.Unlock()
	_ = r.Listener.Close()
	r.CloseClientConnections()
}

// up serves again on the address the receiver had.
func (r *receiver) up() {
	l, err := net.Listen("tcp", r.Listener.Addr().String())
	Expect(err).NotTo(HaveOccurred())
	r.Listener = tls.NewListener(l, r.TLS)
	go func() { _ = r.Config.Serve(r.Listener) }()
	r.mu.Lock()
	r.isDown = false
	r.mu.Unlock()
}

// downNow answers whether the receiver is down (polled: no assertion inside).
func (r *receiver) downNow() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.isDown
}

// abandonedHeld is how many held requests their senders gave up.
func (r *receiver) abandonedHeld() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.abandoned
}

// pendingDeliveries counts an organisation's deliveries not yet delivered nor given up (polled:
// Eventually fails on the error rather than asserting inside).
// deliveredOnce checks, through g, that the outbox has settled every one of ns's deliveries:
// none pending, want delivered, and none claimed (no worker holds a lease on one). A delivery is
// posted only by a worker holding its lease, so the receiver's count is then final: a check that
// each event was posted once needs no wait for silence. (The attempts log is no proof: it keeps
// a subscription's latest attempts only.)
func deliveredOnce(ctx context.Context, g Gomega, ns string, want int) {
	var pending, delivered, claimed int
	g.Expect(testDB.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'pending'),
			count(*) FILTER (WHERE state = 'delivered'), count(*) FILTER (WHERE claimed_until > now())
		FROM notification_deliveries WHERE organisation = $1`, ns).Scan(&pending, &delivered, &claimed)).To(Succeed())
	g.Expect(pending).To(BeZero(), "deliveries pending")
	g.Expect(delivered).To(Equal(want), "deliveries recorded delivered")
	g.Expect(claimed).To(BeZero(), "deliveries a worker holds a lease on")
}

func pendingDeliveries(ctx context.Context, ns string) (int, error) {
	var n int
	err := testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM notification_deliveries WHERE organisation = $1 AND state = 'pending'`,
		ns).Scan(&n)
	return n, err
}

// setSecret makes the receiver verify with another signing secret.
func (r *receiver) setSecret(secret string) {
	wh, err := standardwebhooks.NewWebhook(secret)
	Expect(err).NotTo(HaveOccurred())
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret, r.wh = secret, wh
}

func (r *receiver) setAnswer(f func(n int) int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answer = f
}

// all is every request so far.
func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// delivered is the events answered 2xx, in the order they arrived.
func (r *receiver) delivered() []received {
	var out []received
	for _, g := range r.all() {
		if g.Status >= 200 && g.Status < 300 {
			out = append(out, g)
		}
	}
	return out
}

// kinds summarises delivered events as "type" or "type:change/status".
func (r *receiver) kinds() []string {
	got := r.delivered()
	out := make([]string, 0, len(got))
	for _, g := range got {
		out = append(out, kindOf(g))
	}
	return out
}

func kindOf(g received) string {
	k := g.Type
	if c, ok := g.Data["change"].(string); ok {
		k += ":" + c
	}
	if s, ok := g.Data["status"].(string); ok {
		k += ":" + s
	}
	return k
}

// subscribe creates a Secret with the receiver's signing secret and a Subscription to it.
func subscribe(ctx context.Context, ns string, r *receiver, types ...flexv1.EventType) *flexv1.Subscription {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "sub-"},
		Data: map[string][]byte{delivery.DefaultSecretKey: []byte(r.secret)}}
	Expect(k8sClient.Create(ctx, secret)).To(Succeed())
	sub := &flexv1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "sub-"},
		Spec: flexv1.SubscriptionSpec{URL: r.URL, Events: types, SecretRef: flexv1.SecretKeyReference{Name: secret.Name}}}
	Expect(k8sClient.Create(ctx, sub)).To(Succeed())
	return sub
}

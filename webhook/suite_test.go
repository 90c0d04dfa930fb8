package admission_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/testenv"
	admission "github.com/flexsite/flexsite/webhook"
)

// The webhooks are tested as the API server calls them: envtest installs the generated
// webhook configurations (config/webhook) pointed at the manager's webhook server, and the
// tests create objects through the API server and read its answers.

var (
	env       *testenv.Env
	k8sClient client.Client
)

// maxSubscriptions is the suite's cap on an organisation's Subscriptions (the manager's
// --max-subscriptions), small so that a spec reaches it.
const maxSubscriptions = 3

func TestWebhooks(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Webhook suite (envtest)")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = testenv.Start(ctx, testenv.WithWebhooks)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	k8sClient = env.Client
	mgrCtx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)

	testDB, err := dbtest.ForSuite(ctx, Fail, Skip)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { testDB.Close(ctx) })
	// The webhooks' API-server requests are counted by verb (nolist_test.go).
	counted := rest.CopyConfig(env.Config)
	counted.Wrap(countAdmissionCalls)
	mgr, err := env.NewManagerWithConfig(counted, func(o *ctrl.Options) { o.WebhookServer = taggingServer{o.WebhookServer} })
	Expect(err).NotTo(HaveOccurred())
	Expect(controllers.SetupWithManager(mgrCtx, mgr, controllers.Options{DB: testDB.Pool})).To(Succeed())
	Expect(admission.Setup(mgr, admission.Options{MaxSubscriptions: maxSubscriptions})).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(mgrCtx)).To(Succeed())
	}()

	// Wait for the webhook server to accept TLS connections.
	Eventually(env.WebhookServerUp).Should(Succeed())
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
}, NodeTimeout(3*time.Minute))

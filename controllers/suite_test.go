package controllers_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/testenv"
)

var (
	env       *testenv.Env
	k8sClient client.Client
	suiteCtx  context.Context
	cancel    context.CancelFunc
	// suiteDB is the controllers' PostgreSQL.
	suiteDB *dbtest.Database
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controllers Suite (envtest)")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	suiteCtx, cancel = context.WithCancel(context.Background())

	var err error
	env, err = testenv.Start(suiteCtx)
	Expect(err).NotTo(HaveOccurred())
	k8sClient = env.Client

	// The controllers' PostgreSQL: reward history, outbox, settlements (there is no mode
	// without one).
	testDB, err := dbtest.ForSuite(suiteCtx, Fail, Skip)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { testDB.Close(ctx) })
	suiteDB = testDB
	mgr, err := env.NewManager()
	Expect(err).NotTo(HaveOccurred())
	Expect(controllers.SetupWithManager(suiteCtx, mgr, controllers.Options{DB: testDB.Pool})).To(Succeed())
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(suiteCtx)).To(Succeed())
	}()

	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
})

var _ = AfterSuite(func() {
	cancel()
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
})

package meterpoints_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"testing"

	"github.com/flexsite/flexsite/internal/app/apptest"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/meterpoints"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/meterstore"
	"github.com/flexsite/flexsite/internal/sealing"
	"github.com/flexsite/flexsite/internal/testenv"
	"github.com/flexsite/flexsite/internal/validation"
)

// One API server (the references' keys live in a Secret) and one database (the register and
// the lookup counts) for the package's tests, and the use cases built on them as cmd/manager
// builds them (no HTTP).
var (
	env      *testenv.Env
	database *dbtest.Database
	svc      *meterpoints.Service
)

const keysNamespace = "flexsite-system"

func TestMain(m *testing.M) {
	testenv.MainCached(m, func(ctx context.Context, e *testenv.Env, mgr ctrl.Manager) (func(), error) {
		d, err := dbtest.ForMain(ctx, testenv.Skipping)
		if err != nil {
			return nil, err
		}
		if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keysNamespace}}); err != nil {
			return func() { d.Close(context.Background()) }, err
		}
		register := &meterstore.Store{Pool: d.Pool}
		if _, err := register.Import(ctx, registerFile(), nil); err != nil {
			return func() { d.Close(context.Background()) }, err
		}
		env, database = e, d
		svc = &meterpoints.Service{Log: logr.Discard(), Register: register,
			Keys:    sealing.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), keysNamespace, meterpoints.DefaultKeysSecret, "meter references"),
			Lookups: &meterstore.LookupCounts{Pool: d.Pool}}
		return func() { d.Close(context.Background()) }, nil
	})
}

// mpanOf is the n-th of a run of valid MPANs.
func mpanOf(n int) string {
	first12 := fmt.Sprintf("19%010d", n)
	return first12 + fmt.Sprint(validation.MPANCheckDigit(first12))
}

// registerFile is a register of three meter points at EX1 1AA (1, 2 and 3 Fore Street) and one
// at EX2 2BB.
func registerFile() *bytes.Buffer {
	var file bytes.Buffer
	w := csv.NewWriter(&file)
	_ = w.Write(meters.Columns)
	for i, pc := range []string{"EX1 1AA", "EX1 1AA", "EX1 1AA", "EX2 2BB"} {
		p := meters.Point{MPAN: mpanOf(i + 1), AddressLines: [4]string{fmt.Sprintf("%d Fore Street", i+1)}, Town: "Exeter",
			Postcode: pc, SupplierMPID: "OCTO", SupplierName: "Octopus Energy"}
		_ = w.Write(p.Record())
	}
	w.Flush()
	return &file
}

func org(t *testing.T) *auth.Principal {
	return apptest.Organisation(t, env, "client", flexv1.RoleEntityRead)
}

func kindOf(err error) app.Kind {
	if e := app.As(err); e != nil {
		return e.Kind
	}
	return app.Internal
}

// A search answers the postcode's meter points with sealed references, each of which reads
// back its meter point; the register is read by MPAN, by address, and validated.
func TestSearchAndRead(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	found, err := svc.Search(ctx, p, "ex11aa", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(HaveLen(3))
	g.Expect(found[1].Street).To(Equal("2 Fore Street"))
	m, err := svc.ByRef(ctx, p, found[1].Ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.MPAN).To(Equal(mpanOf(2)))
	one, err := svc.Search(ctx, p, "EX1 1AA", "3")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(one).To(ConsistOf(HaveField("Street", "3 Fore Street")))

	m, err = svc.ByMPAN(ctx, p, mpanOf(4))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.SupplierName).To(Equal("Octopus Energy"))
	m, err = svc.ByAddress(ctx, p, "1 Fore Street, Exeter EX1 1AA")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.MPAN).To(Equal(mpanOf(1)))
	v, err := svc.ValidateMPAN(ctx, p, mpanOf(3))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal(meterpoints.MPANValidation{IsValid: true, Registered: true}))
}

func TestRefusals(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	_, err := svc.Search(ctx, p, "not a postcode", "")
	g.Expect(kindOf(err)).To(Equal(app.Invalid))
	_, err = svc.ByMPAN(ctx, p, "123")
	g.Expect(kindOf(err)).To(Equal(app.Invalid))
	_, err = svc.ByMPAN(ctx, p, mpanOf(99))
	g.Expect(kindOf(err)).To(Equal(app.NotFound))
	_, err = svc.ByAddress(ctx, p, "somewhere without a postcode")
	g.Expect(kindOf(err)).To(Equal(app.Invalid))
	_, err = svc.ByAddress(ctx, p, "Fore Street, Exeter EX1 1AA") // three candidates
	g.Expect(kindOf(err)).To(Equal(app.NotFound))
	_, err = svc.ByRef(ctx, p, "made-up")
	g.Expect(err).To(MatchError(meterpoints.ErrMeterNotFound))
	_, err = svc.ValidateMPAN(ctx, p, "1234567890123")
	g.Expect(kindOf(err)).To(Equal(app.BadRequest))
	_, err = svc.ValidateMPAN(ctx, p, mpanOf(99))
	g.Expect(kindOf(err)).To(Equal(app.NotFound))
}

// A reference is its organisation's: another opens nothing with it.
func TestAnotherOrganisationsReferenceIsNotFound(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	mine, theirs := org(t), org(t)
	found, err := svc.Search(ctx, theirs, "EX2 2BB", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(HaveLen(1))
	_, err = svc.ByRef(ctx, mine, found[0].Ref)
	g.Expect(err).To(MatchError(meterpoints.ErrMeterNotFound))
	_, err = svc.Open(ctx, mine, found[0].Ref)
	g.Expect(err).To(MatchError(meterpoints.ErrMeterNotFound))
	_, err = svc.ByRef(ctx, theirs, found[0].Ref)
	g.Expect(err).NotTo(HaveOccurred())
}

// An organisation past its hour's budget is refused with when to come back, and reads nothing.
func TestBudget(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	budgeted := *svc
	budgeted.Budgets = meters.Budgets{OrganisationPerHour: 2, OrganisationPerDay: 100}
	for range 2 {
		_, err := budgeted.ByMPAN(ctx, p, mpanOf(1))
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err := budgeted.ByMPAN(ctx, p, mpanOf(1))
	g.Expect(kindOf(err)).To(Equal(app.TooManyRequests), "%v", err)
	g.Expect(app.As(err).RetryAfter).NotTo(BeEmpty())
	// Another organisation's budget is its own.
	_, err = budgeted.ByMPAN(ctx, org(t), mpanOf(1))
	g.Expect(err).NotTo(HaveOccurred())
}

// With the database down the register's reads and the lookup counts are refused as
// unavailable, with advice on when to retry; with it back they answer.
func TestDatabaseDownIsUnavailable(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	if database == nil || !database.CanStop() {
		t.Skip("no test database whose server this process runs")
	}
	budgeted := *svc
	budgeted.Budgets = meters.Budgets{OrganisationPerHour: 100, OrganisationPerDay: 1000}
	g.Expect(database.Stop()).To(Succeed())
	up := false
	t.Cleanup(func() {
		if !up {
			_ = database.Start(context.Background())
		}
	})
	for name, read := range map[string]func() error{
		"search":           func() error { _, err := svc.Search(ctx, p, "EX1 1AA", ""); return err },
		"by MPAN":          func() error { _, err := svc.ByMPAN(ctx, p, mpanOf(1)); return err },
		"validate":         func() error { _, err := svc.ValidateMPAN(ctx, p, mpanOf(1)); return err },
		"counted, by MPAN": func() error { _, err := budgeted.ByMPAN(ctx, p, mpanOf(1)); return err },
	} {
		err := read()
		g.Expect(err).To(MatchError(meterpoints.ErrRegisterUnavailable), name)
		g.Expect(app.As(err).RetryAfter).NotTo(BeEmpty())
	}
	g.Expect(database.Start(ctx)).To(Succeed())
	up = true
	_, err := budgeted.ByMPAN(ctx, p, mpanOf(1))
	g.Expect(err).NotTo(HaveOccurred())
}

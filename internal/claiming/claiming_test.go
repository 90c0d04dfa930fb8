package claiming_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	claimrule "github.com/flexsite/flexsite/internal/claim"
	"github.com/flexsite/flexsite/internal/claiming"
	"github.com/flexsite/flexsite/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.MainShared(m, &env) }

var (
	errOtherHolder = errors.New("another holder")
	errTaken       = errors.New("taken")
)

// world is what the claimant's rules see: which site's claims are the claimant's, what the
// stored claim is worth, and whether another holder turns up.
type world struct {
	standing    claimrule.Standing
	otherHolder bool
	judged      int
}

func claimant(ns string, w *world, dryRun bool) claiming.Claimant[flexv1.MPANClaim, *flexv1.MPANClaim] {
	return claiming.Claimant[flexv1.MPANClaim, *flexv1.MPANClaim]{
		Want: func() *flexv1.MPANClaim {
			return &flexv1.MPANClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mpan-1200000000011"},
				Spec: flexv1.MPANClaimSpec{MPAN: "1200000000011", SiteName: "ours"}}
		},
		Judge: func(_ context.Context, existing *flexv1.MPANClaim) (bool, claimrule.Standing, error) {
			w.judged++
			return existing.Spec.SiteName == "ours", w.standing, nil
		},
		OtherHolder: func() error {
			if w.otherHolder {
				return errOtherHolder
			}
			return nil
		},
		Taken: func(existing *flexv1.MPANClaim, standing claimrule.Standing) error {
			return errTaken
		},
		What:   "MPAN 1200000000011 for site ours",
		DryRun: dryRun,
	}
}

// The protocol's answers, by what is stored before and what the claimant's rules say.
func TestClaim(t *testing.T) {
	for _, tc := range []struct {
		name        string
		stored      string // the site the stored claim names ("": none)
		standing    claimrule.Standing
		otherHolder bool
		dryRun      bool
		wantErr     error
		wantCreated bool
		wantStored  string // the site the claim names after ("": none)
		wantNewUID  bool   // the stored claim was replaced
	}{
		{name: "no claim: made", wantCreated: true, wantStored: "ours"},
		{name: "no claim, another holder: made and withdrawn", otherHolder: true, wantErr: errOtherHolder},
		{name: "our claim that binds: kept", stored: "ours", standing: claimrule.Pending, wantStored: "ours"},
		{name: "our claim that binds, another holder: refused, the claim kept", stored: "ours", standing: claimrule.Held,
			otherHolder: true, wantErr: errOtherHolder, wantStored: "ours"},
		{name: "another's claim, held: refused", stored: "theirs", standing: claimrule.Held, wantErr: errTaken, wantStored: "theirs"},
		{name: "another's claim, pending: refused", stored: "theirs", standing: claimrule.Pending, wantErr: errTaken, wantStored: "theirs"},
		{name: "another's stale claim: replaced", stored: "theirs", standing: claimrule.Stale, wantCreated: true, wantStored: "ours", wantNewUID: true},
		{name: "our stale claim: replaced", stored: "ours", standing: claimrule.Stale, wantCreated: true, wantStored: "ours", wantNewUID: true},
		{name: "dry run, no claim: nothing written", dryRun: true},
		{name: "dry run, no claim, another holder: refused", dryRun: true, otherHolder: true, wantErr: errOtherHolder},
		{name: "dry run, a stale claim: left", dryRun: true, stored: "theirs", standing: claimrule.Stale, wantStored: "theirs"},
		{name: "dry run, another's claim that binds: refused", dryRun: true, stored: "theirs", standing: claimrule.Held,
			wantErr: errTaken, wantStored: "theirs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := testenv.SharedNamespace(t, env)
			w := &world{standing: tc.standing, otherHolder: tc.otherHolder}
			c := claimant(ns, w, tc.dryRun)
			var uid string
			if tc.stored != "" {
				stored := c.Want()
				stored.Spec.SiteName = tc.stored
				if err := env.Client.Create(t.Context(), stored); err != nil {
					t.Fatal(err)
				}
				uid = string(stored.UID)
			}
			created, err := claiming.Claim(t.Context(), env.Client, env.Client, c)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Claim = %v, want %v", err, tc.wantErr)
			}
			if (created != nil) != tc.wantCreated {
				t.Errorf("Claim answered the claim %v, want %v", created, tc.wantCreated)
			}
			after := &flexv1.MPANClaim{}
			err = env.Client.Get(t.Context(), client.ObjectKeyFromObject(c.Want()), after)
			switch {
			case tc.wantStored == "" && !apierrors.IsNotFound(err):
				t.Errorf("a claim of %q is stored (%v), want none", after.Spec.SiteName, err)
			case tc.wantStored != "" && (err != nil || after.Spec.SiteName != tc.wantStored):
				t.Errorf("stored claim of %q (%v), want %q", after.Spec.SiteName, err, tc.wantStored)
			case tc.wantStored != "" && uid != "" && (string(after.UID) != uid) != tc.wantNewUID:
				t.Errorf("the stored claim was replaced: %v, want %v", string(after.UID) != uid, tc.wantNewUID)
			}
		})
	}
}

// A claim that keeps meeting another claimant's claim that goes stale and changes before it
// can be deleted gives up after claiming.Attempts, as a failure (not a refusal).
func TestClaimGivesUpWhenContended(t *testing.T) {
	ns := testenv.SharedNamespace(t, env)
	w := &world{standing: claimrule.Stale}
	c := claimant(ns, w, false)
	stored := c.Want()
	stored.Spec.SiteName = "theirs"
	if err := env.Client.Create(t.Context(), stored); err != nil {
		t.Fatal(err)
	}
	judge := c.Judge
	c.Judge = func(ctx context.Context, existing *flexv1.MPANClaim) (bool, claimrule.Standing, error) {
		// The other claimant touches its claim between our read and our delete: the delete's
		// precondition fails.
		touched := existing.DeepCopy()
		touched.Labels = map[string]string{"touched": strings.Repeat("x", w.judged+1)}
		if err := env.Client.Update(ctx, touched); err != nil {
			return false, 0, err
		}
		return judge(ctx, existing)
	}
	created, err := claiming.Claim(t.Context(), env.Client, env.Client, c)
	if err == nil || errors.Is(err, errTaken) || created != nil || !strings.Contains(err.Error(), "still contended") {
		t.Fatalf("Claim = %v, %v; want a failure to retry", created, err)
	}
	if w.judged != claiming.Attempts {
		t.Errorf("%d attempts, want %d", w.judged, claiming.Attempts)
	}
}

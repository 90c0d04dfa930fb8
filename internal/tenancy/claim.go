package tenancy

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	claimrule "github.com/flexsite/flexsite/internal/claim"
	"github.com/flexsite/flexsite/internal/claiming"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
)

// ClaimGrace is how long a claim whose API client does not hold the username (yet) is
// honoured: the request that made it is still being admitted and stored, which takes
// milliseconds, or at most the API server's request timeout.
const ClaimGrace = time.Minute

// Standing judges c given its API client (nil when that does not exist).
func Standing(c *flexv1.UsernameClaim, holder *flexv1.APIClient, now time.Time) claimrule.Standing {
	held := holder != nil && holder.DeletionTimestamp.IsZero() && holder.Spec.Username == c.Spec.Username
	return claimrule.Judge(held, c.CreationTimestamp.Time, ClaimGrace, now)
}

// NewClaim is the claim of c's username for c.
func NewClaim(c *flexv1.APIClient) *flexv1.UsernameClaim {
	return &flexv1.UsernameClaim{
		ObjectMeta: metav1.ObjectMeta{Name: identity.UsernameClaimName(c.Spec.Username)},
		Spec: flexv1.UsernameClaimSpec{Username: c.Spec.Username,
			APIClientNamespace: c.Namespace, APIClientName: c.Name},
	}
}

// UsernameTakenError says another API client holds the username, or is about to.
type UsernameTakenError struct {
	Username string
	// Holder is the API client that holds the username, or claimed it.
	Holder client.ObjectKey
	// Pending: the holder claimed the username a moment ago and is not stored yet.
	Pending bool
}

func (e *UsernameTakenError) Error() string {
	if e.Pending {
		return fmt.Sprintf("username %q is being claimed by API client %s", e.Username, e.Holder)
	}
	return fmt.Sprintf("username %q is held by API client %s", e.Username, e.Holder)
}

// ClaimUsername reserves c's username for c before c is stored, or reports an
// UsernameTakenError. It claims first and then looks for other holders: the claims are read
// from the API server (fresh must not be a cache), and two clients admitted at the same moment
// meet at the claim's name, where the API server lets one create it. The look for holders
// finds a client stored without a claim (before the webhook existed), which the cache has long
// seen: holders finds them as the cache has, read as stored now by GET (an admission
// webhook's is index.NewFreshLookup), never by a LIST of every API client (docs/scale.md,
// "Request paths: no LIST"). A claim this call made is withdrawn when another holder turns up.
// With dryRun it writes nothing and answers what a real request would meet now. The protocol
// is internal/claiming's.
func ClaimUsername(ctx context.Context, w client.Client, fresh client.Reader, holders index.Lookup, c *flexv1.APIClient,
	now time.Time, dryRun bool) error {
	_, err := claiming.Claim(ctx, w, fresh, claiming.Claimant[flexv1.UsernameClaim, *flexv1.UsernameClaim]{
		Want: func() *flexv1.UsernameClaim { return NewClaim(c) },
		Judge: func(ctx context.Context, existing *flexv1.UsernameClaim) (bool, claimrule.Standing, error) {
			holder, err := holderOf(ctx, fresh, existing)
			if err != nil {
				return false, 0, err
			}
			own := existing.Spec.APIClientNamespace == c.Namespace && existing.Spec.APIClientName == c.Name
			return own, Standing(existing, holder, now), nil
		},
		OtherHolder: func() error { return otherHolder(ctx, holders, c) },
		Taken: func(existing *flexv1.UsernameClaim, standing claimrule.Standing) error {
			return &UsernameTakenError{Username: c.Spec.Username, Pending: standing == claimrule.Pending,
				Holder: client.ObjectKey{Namespace: existing.Spec.APIClientNamespace, Name: existing.Spec.APIClientName}}
		},
		What:   fmt.Sprintf("username %q for API client %s/%s", c.Spec.Username, c.Namespace, c.Name),
		DryRun: dryRun,
	})
	return err
}

// otherHolder reports, as a UsernameTakenError, an API client other than c, in any
// namespace, that holds c's username.
func otherHolder(ctx context.Context, holders index.Lookup, c *flexv1.APIClient) error {
	found, err := holders.APIClientsByUsername(ctx, c.Spec.Username)
	if err != nil {
		return fmt.Errorf("looking up API clients with username %q: %w", c.Spec.Username, err)
	}
	items := make([]flexv1.APIClient, len(found))
	for i, o := range found {
		items[i] = *o
	}
	for _, other := range Holders(items, c.Spec.Username) {
		if other.Namespace != c.Namespace || other.Name != c.Name {
			return &UsernameTakenError{Username: c.Spec.Username, Holder: client.ObjectKeyFromObject(other)}
		}
	}
	return nil
}

func holderOf(ctx context.Context, r client.Reader, claim *flexv1.UsernameClaim) (*flexv1.APIClient, error) {
	c := &flexv1.APIClient{}
	err := r.Get(ctx, client.ObjectKey{Namespace: claim.Spec.APIClientNamespace, Name: claim.Spec.APIClientName}, c)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

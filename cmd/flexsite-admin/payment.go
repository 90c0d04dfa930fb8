package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/rewardstore"
	"github.com/flexsite/flexsite/internal/validation"
)

// paymentStatuses a withdrawal may be asked to move to (which step is allowed from where is
// household.PaymentChange's, judged by the store).
var paymentStatuses = household.PaymentTargets

const paymentUsage = "usage: flexsite-admin payment-status --organisation NAMESPACE --site-id SITE_ID " +
	"--transaction-id ID --status approved|processing|posted|failed|rejected|cancelled|returned [--actor NAME] " +
	"(database: $FLEXSITE_DATABASE_URL or --database-url)"

// paymentStatus moves a withdrawal's payment status on in Flexsite's database, recording who
// (--actor, default the login name) and when; the manager's RewardLedger summary follows.
func paymentStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("payment-status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	org := fs.String("organisation", "", "The organisation: the namespace of the site.")
	siteID := fs.String("site-id", "", "The site's API id (UUID).")
	txID := fs.String("transaction-id", "", "The withdrawal's transaction id (UUID).")
	status := fs.String("status", "", "The new payment status.")
	actor := fs.String("actor", "", "Who makes the change (recorded; default: flexsite-admin and the login name).")
	url := fs.String("database-url", "", "PostgreSQL URL (default $FLEXSITE_DATABASE_URL; prefer it: a flag is in the process list).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" {
		*url = os.Getenv("FLEXSITE_DATABASE_URL")
	}
	var problems []error
	if *org == "" || *url == "" {
		problems = append(problems, errors.New(paymentUsage))
	}
	site, err := validation.ParseUUID(*siteID)
	if err != nil {
		problems = append(problems, fmt.Errorf("--site-id: %w", err))
	}
	tx, err := validation.ParseUUID(*txID)
	if err != nil {
		problems = append(problems, fmt.Errorf("--transaction-id: %w", err))
	}
	if !slices.Contains(paymentStatuses, flexv1.PaymentStatus(*status)) {
		problems = append(problems, fmt.Errorf("--status %q is not one of %v", *status, paymentStatuses))
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	if *actor == "" {
		*actor = "flexsite-admin"
		if u, err := user.Current(); err == nil {
			*actor += ":" + u.Username
		}
	}
	pool, err := db.Open(ctx, *url)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := &rewardstore.Store{Pool: pool}
	got, err := store.SetPaymentStatus(ctx, rewardstore.Site{Namespace: *org, ID: site}, tx, flexv1.PaymentStatus(*status), *actor)
	var refused *household.PaymentChangeRefused
	switch {
	case errors.As(err, &refused):
		return fmt.Errorf("withdrawal %s at site %s of %s: %w; nothing was changed", tx, site, *org, err)
	case errors.Is(err, db.ErrNotFound):
		return fmt.Errorf("no transaction %s at site %s of %s", tx, site, *org)
	case err != nil:
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s: payment_status %s (recorded as %s)\n", got.ID, got.PaymentStatus, *actor)
	return err
}

package rewards

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Before the rewards page's state moved to PostgreSQL (migration 00015), a site's bank details
// were the Secret flexsite-bank-<site id> of its organisation's namespace. They are moved into
// the database once, by the leader, so that no household has to enter them again.
const (
	legacyBankSecretPrefix = "flexsite-bank-"
	legacyBankImport       = "bank-details-secrets"
	// LegacyImportInterval is how long the importer waits before trying again what it could
	// not move (an organisation whose RoleBinding is not made yet, the database away).
	LegacyImportInterval = time.Minute
)

// LegacyImporter moves bank details kept in Secrets into the database (a leader's runnable:
// it ends once everything is moved).
type LegacyImporter struct {
	Rewards *Service
	// Interval between attempts (default LegacyImportInterval).
	Interval time.Duration
}

// NeedLeaderElection: one replica moves them.
func (im *LegacyImporter) NeedLeaderElection() bool { return true }

// Start moves the bank details, trying again every Interval until all are moved.
func (im *LegacyImporter) Start(ctx context.Context) error {
	interval := im.Interval
	if interval <= 0 {
		interval = LegacyImportInterval
	}
	// Errors are logged, not returned: returning one would end the polling (and the manager).
	// The polling ends with ctx's error when the manager stops, which is no failure.
	_ = wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		done, err := im.Rewards.ImportLegacyBankDetails(ctx)
		if err != nil {
			im.Rewards.Log.Error(err, "moving bank details from Secrets into the database")
		}
		return done, nil
	})
	return nil
}

// ImportLegacyBankDetails moves every site's bank details Secret into the database (unless
// the household has entered details since) and deletes the Secret; it answers true once all
// are moved, after which it does nothing. One namespaced GET per site, once per installation.
func (s *Service) ImportLegacyBankDetails(ctx context.Context) (bool, error) {
	if done, err := s.Private.Imported(ctx, legacyBankImport); err != nil || done {
		return done, err
	}
	sites := &flexv1.SiteList{}
	if err := s.Cache.List(ctx, sites, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	complete, moved := true, 0
	for i := range sites.Items {
		site := &sites.Items[i]
		id := site.Labels[flexv1.IDLabel]
		if id == "" {
			continue
		}
		secret := &corev1.Secret{}
		err := s.APIReader.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: legacyBankSecretPrefix + id}, secret)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err == nil {
			err = s.moveBankSecret(ctx, site.Namespace, id, secret)
		}
		if err != nil {
			// Never the Secret's data: only where it is.
			s.Log.Error(err, "moving a site's bank details into the database", "namespace", site.Namespace, "site", id)
			complete = false
			continue
		}
		moved++
	}
	if moved > 0 {
		s.Log.Info("moved bank details from Secrets into the database", "sites", moved)
	}
	if !complete {
		return false, nil
	}
	return true, s.Private.MarkImported(ctx, legacyBankImport)
}

func (s *Service) moveBankSecret(ctx context.Context, namespace, siteID string, secret *corev1.Secret) error {
	plaintext, err := json.Marshal(BankDetails{AccountName: string(secret.Data["account_name"]),
		SortCode: string(secret.Data["sort_code"]), AccountNumber: string(secret.Data["account_number"])})
	if err != nil {
		return err
	}
	if _, err := s.Private.PutBankDetailsIfAbsent(ctx, namespace, siteID, plaintext); err != nil {
		return storeErr(err)
	}
	return client.IgnoreNotFound(s.Client.Delete(ctx, secret, client.Preconditions{UID: &secret.UID}))
}

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/deviceauth"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/shards"
)

// setupReconcilers adds the reconcilers of the tier: in the controller tier the per-site ones,
// in the API tier the organisation-wide ones, with --tier=all both. It answers where what
// needs a leader goes: the manager itself, or, in a shard (--shard), the group that runs
// under the leader lease.
func setupReconcilers(ctx context.Context, w *wiring, webhookOpts webhook.Options, caData []byte) (manager.Manager, error) {
	o := w.o
	var replica *shards.Replica
	lm := w.mgr
	if o.shard {
		var err error
		if replica, lm, err = joinRing(ctx, w.mgr, o, w.keysNS, webhookOpts, caData); err != nil {
			return nil, err
		}
	}
	work := controllers.AllWork
	switch o.tier {
	case tierAPI:
		work = controllers.OrgWideWork
	case tierControllers:
		work = controllers.PerSiteWork
	}
	var subscribers dispatchstore.Subscribers
	if w.notifier != nil {
		subscribers = w.notifier
	}
	if err := controllers.SetupWithManager(ctx, lm, controllers.Options{Concurrency: o.concurrency, Background: w.background,
		Work: work, Shard: replica, DB: w.pool, Devices: deviceauth.Dialer{Policy: o.providerPolicy(), SecretNamespace: w.keysNS},
		OrganisationAccess: bootstrap.OrganisationAccess{ClusterRole: o.organisationSecretsRole,
			ServiceAccountNamespace: w.keysNS, ServiceAccountName: o.serviceAccount,
			ControllersServiceAccountName: o.controllersServiceAccount},
		PublicURL: callbackURL(o.mail.publicURL, o.apiAddr), Subscribers: subscribers}); err != nil {
		return nil, fmt.Errorf("setting up the controllers: %w", err)
	}
	return lm, nil
}

// joinRing makes the manager a shard of the ring, and, with --sharder (implied with
// --embedded, where no other sharder can run), runs the sharder in it. It answers the replica
// and the manager that what needs a leader is added to.
func joinRing(ctx context.Context, mgr manager.Manager, o options, leaseNS string, wh webhook.Options,
	caData []byte) (*shards.Replica, manager.Manager, error) {
	id := ""
	if o.leaderElect {
		id = leaderElectionID
	}
	replica, err := shards.Join(mgr, shards.Options{Shard: o.shardName, Namespace: leaseNS, LeaderElectionID: id,
		PerSiteOnly: o.tier == tierControllers})
	if err != nil {
		return nil, nil, err
	}
	if o.tier == tierControllers {
		return replica, mgr, nil // no organisation-wide work (validate refuses --sharder)
	}
	if !o.sharder && !o.embedded {
		return replica, replica.OrgWide, nil
	}
	url := o.sharderWebhookURL
	if url == "" && o.embedded {
		url = "https://" + net.JoinHostPort(wh.Host, strconv.Itoa(wh.Port)) + "/"
	}
	if o.sharderWebhookCAFile != "" {
		if caData, err = os.ReadFile(o.sharderWebhookCAFile); err != nil {
			return nil, nil, fmt.Errorf("--sharder-webhook-ca-file: %w", err)
		}
	}
	if url == "" || len(caData) == 0 {
		return nil, nil, errors.New("--sharder needs --sharder-webhook-url and --sharder-webhook-ca-file (they default only with --embedded)")
	}
	err = shards.AddSharder(ctx, replica.OrgWide, shards.SharderOptions{
		Webhook: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caData}})
	return replica, replica.OrgWide, err
}

// callbackURL is where asset controllers reach the REST API for the dispatches' status
// callbacks: --public-url, else the REST API's own address over http (a wildcard host as the
// loopback), which only an asset controller on the same machine reaches: set --public-url
// wherever they run elsewhere.
func callbackURL(publicURL, apiAddr string) string {
	if publicURL != "" {
		return publicURL
	}
	host, port, err := net.SplitHostPort(apiAddr)
	if err != nil {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

package main

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/flexsite/flexsite/internal/shards"
)

// The sharder's client rate, as the chart runs it (sharding.sharder.clientConnection, upstream's
// defaults): it moves a departed shard's objects one patch after another at this rate, so it is
// what sets a hand-over's households per second.
const (
	sharderQPS   = 100
	sharderBurst = 150
)

// sharderProc is timebertt's sharder (its controllers and webhook) run inside the bench, in a
// controller-runtime manager of its own: the chart's sharder Deployment, one replica. Its webhook
// is served on a port of its own with the control plane's webhook certificate.
type sharderProc struct {
	cancel context.CancelFunc
	done   chan error
}

// startSharder starts the sharder against the bench's control plane; it applies the ring.
func (b *bench) startSharder(ctx context.Context) (*sharderProc, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	wh := b.cp.Webhook
	cfg := rest.CopyConfig(b.cp.Config)
	cfg.QPS, cfg.Burst = sharderQPS, sharderBurst
	rest.AddUserAgent(cfg, "sharder")
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		// The sharder reads the shard Leases of rings only (and the ring's objects' metadata).
		Cache:                  cache.Options{ByObject: shards.CacheByObject()},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: wh.Host, Port: ports[0], CertDir: wh.CertDir}),
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("the sharder's manager: %w", err)
	}
	url := fmt.Sprintf("https://%s:%d/", wh.Host, ports[0])
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := shards.AddSharder(runCtx, mgr, shards.SharderOptions{
		Webhook: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: wh.CAData}}); err != nil {
		cancel()
		return nil, err
	}
	s := &sharderProc{cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- mgr.Start(runCtx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		s.stop()
		return nil, fmt.Errorf("the sharder's cache did not sync")
	}
	logf("shards: the sharder up (webhook %s, client %d requests/s, burst %d)", url, sharderQPS, sharderBurst)
	return s, nil
}

// stop stops the sharder and waits for it. Safe on nil.
func (s *sharderProc) stop() {
	if s == nil || s.cancel == nil {
		return
	}
	s.cancel()
	if err := <-s.done; err != nil {
		logf("shards: the sharder stopped: %v", err)
	}
	s.cancel = nil
}

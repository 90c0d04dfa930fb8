package main

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/ledger"
)

// newLedgerStore is the read path's store of reward ledgers (compact, outside the shared
// cache): its own list and watch of RewardLedgers.
func newLedgerStore(cfg *rest.Config, scheme *runtime.Scheme) (*ledger.Store, error) {
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return ledger.NewStore(c), nil
}

package rewards

import (
	"testing"

	"github.com/flexsite/flexsite/internal/pagestore"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// The rewards use cases have no mode without their database (a balance summed in Go from a
// RewardLedger's spec, a withdrawal written into it): a Config without it is refused.
func TestNewRefusesNoDatabase(t *testing.T) {
	for name, cfg := range map[string]Config{
		"neither":    {},
		"no history": {Private: &pagestore.Store{}},
		"no page":    {Store: &rewardstore.Store{}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: New answered a service", name)
				}
			}()
			New(cfg)
		}()
	}
}

package server_test

import (
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/server"
)

// There is no mode without a database: a server wired without one is refused when it is
// built (it once served the rewards from RewardLedgers' specs and answered readings 503).
func TestNewServerRefusesNoDatabase(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "Config.DB is required") {
			t.Errorf("NewServer without a database: %v, want refused", r)
		}
	}()
	server.NewServer(server.Config{})
}

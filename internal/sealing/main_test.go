package sealing_test

import (
	"testing"

	"github.com/flexsite/flexsite/internal/testenv"
)

// env is the API server the rotation tests share; nil when KUBEBUILDER_ASSETS is unset, and
// then they skip.
var env *testenv.Env

func TestMain(m *testing.M) { testenv.MainShared(m, &env) }

// newNamespace is a namespace of the test's own (the test skips without an API server).
func newNamespace(t *testing.T) string { return testenv.SharedNamespace(t, env) }

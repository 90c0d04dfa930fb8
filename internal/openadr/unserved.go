package openadr

import (
	"net/http"

	"github.com/flexsite/flexsite/internal/auth"
)

// notYet answers an operation whose translation is being written (501, in the problem form).
// Each unserved_*.go file goes when its operations are served.
func notYet(*http.Request, *auth.Principal) (any, error) {
	return nil, newProblem(http.StatusNotImplemented, "Not served yet")
}

package web

import (
	"bytes"
	"net/http"
	"os"
	"strconv"
	"sync"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
)

// StackBaselineEnv, set to any value in the manager's environment, mounts StackBaselinePattern:
// for the bench only (cmd/flexsite-bench's read path), nothing else sets it. Unset, the route
// does not exist (a 404 like any unknown path).
const StackBaselineEnv = "FLEXSITE_BENCH_STACK_BASELINE"

// StackBaselinePattern is the bench's trivial read behind the stack every route pays: it
// answers {n} bytes of constant JSON through the same mux, Observe (request id, access log,
// metrics, panic recovery) and Guard (token check, client still active, rate limit, roles,
// CORS) as a documented read, and does nothing else. The bench divides a read's throughput by
// this route's at the read's answer size: what is left is the read's own work; this route
// against a bare net/http handler of the same bytes is what the stack costs every request.
const StackBaselinePattern = "GET " + StackBaselinePath + "{n}"

// StackBaselinePath is StackBaselinePattern's path before its size.
const StackBaselinePath = "/bench/stack-trivial/"

// StackBaselineEnabled reports whether StackBaselineEnv is set.
func StackBaselineEnabled() bool { return os.Getenv(StackBaselineEnv) != "" }

// maxStackBaselineBytes bounds what the baseline answers.
const maxStackBaselineBytes = 1 << 20

// stackBaselineBody is "{}" and spaces: any prefix of two bytes or more is a JSON document.
// Made on the first call: a manager without the route holds none of it.
var stackBaselineBody = sync.OnceValue(func() []byte {
	return append([]byte("{}"), bytes.Repeat([]byte(" "), maxStackBaselineBytes-2)...)
})

// StackBaseline is the handler of StackBaselinePattern, to be put behind Guard with the
// arguments of the read it is a baseline of. Its answer is already encoded, as the reads'
// are (app.EncodedJSON: WriteJSON writes it as it is, one slice).
func StackBaseline(r *http.Request, _ *auth.Principal) (any, error) {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 2 || n > maxStackBaselineBytes {
		return nil, Fail(http.StatusBadRequest, "bad size")
	}
	return app.EncodedJSON(stackBaselineBody()[:n]), nil
}

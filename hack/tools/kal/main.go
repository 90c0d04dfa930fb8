// Command golangci-lint-kal is golangci-lint with the Kube API Linter (KAL) compiled in as a
// module plugin, as `golangci-lint custom` would build it (that command clones golangci-lint
// from GitHub; this module gets the same sources from the Go module proxy instead). The
// versions of both are pinned in this directory's go.mod; `make lint-api` builds it into bin/.
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/golangci/golangci-lint/v2/pkg/commands"
	"github.com/golangci/golangci-lint/v2/pkg/exitcodes"

	// The module plugin registers itself as the "kubeapilinter" custom linter, like the
	// plugins.go that `golangci-lint custom` generates.
	_ "sigs.k8s.io/kube-api-linter"
)

// Set with -ldflags -X by the Makefile, as `golangci-lint custom` does.
var (
	version = "unknown"
	date    = "(unknown)"
)

func main() {
	info := commands.BuildInfo{Version: version, Commit: "?", Date: date, GoVersion: runtime.Version()}
	if err := commands.Execute(info); err != nil {
		_, _ = fmt.Fprintf(os.Stderr, "The command is terminated due to an error: %v\n", err)
		os.Exit(exitcodes.Failure)
	}
}

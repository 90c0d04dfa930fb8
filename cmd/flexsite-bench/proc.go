package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// childProc is a subprocess the bench owns: the manager or the trivial server. It is started
// in its own process group (a Ctrl-C reaches the bench, which stops it in order) and dies
// with the bench if the bench is killed outright (childProcAttr).
type childProc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // Wait's result, once exited is closed
}

// startChild runs binary with args, appending its output to logPath.
func startChild(name, binary, logPath string, args ...string) (*childProc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// The child holds its own descriptor; the bench's copy is not needed once it runs.
	defer func() { _ = logFile.Close() }()
	fmt.Fprintf(logFile, "\n===== %s %s: %s %v\n", time.Now().Format(time.RFC3339), name, binary, args)
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = childProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &childProc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *childProc) pid() int { return p.cmd.Process.Pid }

func (p *childProc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop asks the process to end (SIGTERM: the manager drains and releases its watches), and
// kills it if it has not within 20 seconds.
func (p *childProc) stop() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		logf("%s did not stop within 20s; killing it", p.name)
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// kill ends the process at once (SIGKILL), as a node that is lost or a container killed for
// its memory: it releases nothing, its leases expire.
func (p *childProc) kill() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// waitHTTP polls url until it answers 200, the process exits, or the time is up. It returns
// how long that took from when it was called.
func (p *childProc) waitHTTP(ctx context.Context, hc *http.Client, url string, limit time.Duration) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(limit)
	for {
		if ok := get200(ctx, hc, url); ok {
			return time.Since(start), nil
		}
		select {
		case <-p.exited:
			return 0, fmt.Errorf("%s exited before it was ready: %v", p.name, p.err)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s not ready at %s after %s", p.name, url, limit)
		}
	}
}

func get200(ctx context.Context, hc *http.Client, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	drain(resp)
	return resp.StatusCode == http.StatusOK
}

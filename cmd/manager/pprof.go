package main

import (
	"fmt"
	"net"
)

// checkPprofAddr refuses a pprof address reachable from other machines unless allowRemote.
// pprof has no authentication, and what it serves is sensitive: heap profiles and goroutine
// dumps can hold tokens, password hashes and request bodies in flight, and a CPU profile or
// a trace costs the process real time on request. So it binds to the loopback interface
// (reach it with kubectl port-forward) unless the operator says, with --pprof-allow-remote,
// that something else (a NetworkPolicy and an authenticating proxy) guards it.
//
// An empty address and "0" disable pprof, as controller-runtime reads them.
func checkPprofAddr(addr string, allowRemote bool) error {
	if addr == "" || addr == "0" || allowRemote {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--pprof-bind-address %q: %w", addr, err)
	}
	if isLoopback(host) {
		return nil
	}
	return fmt.Errorf("--pprof-bind-address %q listens beyond this machine, and pprof has no authentication: "+
		"use 127.0.0.1:<port> (kubectl port-forward reaches it), or pass --pprof-allow-remote and put it behind "+
		"authentication", addr)
}

// isLoopback tells whether host names the loopback interface only. An empty host (":6060")
// is every interface. "localhost" is taken at its word: it is loopback by convention, and
// resolving it here would not stop /etc/hosts from changing later.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

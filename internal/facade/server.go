// Package facade serves Flexsite's REST API. Every call maps onto creating, updating and
// deleting the Site, Asset and Enrolment resources (and reward ledgers and credentials); the
// Kubernetes API is the only store.
package facade

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
)

// Server is the REST facade's HTTP server. It runs in every replica of the manager (it does
// not need the leader lease): reads come from the shared cache, writes go to the API server.
type Server struct {
	// Addr to listen on, e.g. 127.0.0.1:8080.
	Addr string
	// Ready reports whether the server can answer (the manager's caches have synced).
	Ready func() bool
	Log   logr.Logger

	mux *http.ServeMux
}

// NewServer builds the facade's routes.
func NewServer(addr string, ready func() bool, log logr.Logger) *Server {
	s := &Server{Addr: addr, Ready: ready, Log: log, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	s.mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.Ready() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return s
}

// ServeHTTP makes the server usable in httptest.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// NeedLeaderElection tells the manager to run the facade in every replica.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, then drains in-flight requests for up to 10 s.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	s.Log.Info("REST API listening", "address", "http://"+ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

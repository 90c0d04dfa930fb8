// Package pgserver runs a local PostgreSQL server from the distribution's binaries
// (hack/ensure-postgres.sh finds or installs them): the embedded database of `make run` and the
// real database of the tests. It initialises a data directory once, starts `postgres` on a free
// loopback port with its unix socket inside the directory, and stops it (and starts it again:
// the tests take the database away that way). It is never used against a cluster.
package pgserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// postgresBinary is the server's executable, and the name of its maintenance database.
const postgresBinary = "postgres"

// Superuser is the name of the server's superuser (initdb -U).
const Superuser = "flexsite"

// Options configure a server.
type Options struct {
	// BinDir holds initdb and postgres (e.g. /usr/lib/postgresql/15/bin).
	BinDir string
	// Dir is the server's own directory: data/ (the cluster), run/ (the unix socket), password.
	// It is created when missing and kept between runs.
	Dir string
	// Port to listen on, on 127.0.0.1; 0 picks a free one (kept across Stop and Start).
	Port int
	// Throwaway turns durability off (fsync, synchronous_commit, full_page_writes): for tests
	// only, whose data nobody keeps.
	Throwaway bool
	// Log receives the server's own log (nil: discarded).
	Log io.Writer
}

// Server is a PostgreSQL server this process started.
type Server struct {
	opts     Options
	port     int
	password string
	cred     *syscall.Credential

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Start initialises the data directory when it is new and starts the server.
func Start(ctx context.Context, opts Options) (*Server, error) {
	for _, bin := range []string{"initdb", postgresBinary} {
		if _, err := os.Stat(filepath.Join(opts.BinDir, bin)); err != nil {
			return nil, fmt.Errorf("PostgreSQL's %s not found in %q (run hack/ensure-postgres.sh): %w", bin, opts.BinDir, err)
		}
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, err
	}
	opts.Dir = dir
	s := &Server{opts: opts, port: opts.Port}
	if s.cred, err = runAs(); err != nil {
		return nil, err
	}
	if err := s.init(ctx); err != nil {
		return nil, err
	}
	if s.port == 0 {
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
	}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// runAs is the user postgres runs as: this process's, or when this process is root (which
// PostgreSQL refuses) the `postgres` system user, else `nobody`.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, and PostgreSQL refuses to: no `postgres` or `nobody` user to run it as")
}

func (s *Server) dataDir() string { return filepath.Join(s.opts.Dir, "data") }
func (s *Server) runDir() string  { return filepath.Join(s.opts.Dir, "run") }

// init creates the directory and, once, the cluster with a random superuser password.
func (s *Server) init(ctx context.Context) error {
	pwFile := filepath.Join(s.opts.Dir, "password")
	for _, d := range []string{s.opts.Dir, s.runDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(s.dataDir(), "PG_VERSION")); err == nil {
		pw, err := os.ReadFile(pwFile)
		if err != nil {
			return fmt.Errorf("the database in %s has no password file: %w (make run-clean forgets it)", s.opts.Dir, err)
		}
		s.password = strings.TrimSpace(string(pw))
		return s.chown()
	}
	if err := os.RemoveAll(s.dataDir()); err != nil {
		return err
	}
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	s.password = hex.EncodeToString(b)
	if err := os.WriteFile(pwFile, []byte(s.password+"\n"), 0o600); err != nil {
		return err
	}
	if err := s.chown(); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(s.opts.BinDir, "initdb"), "-D", s.dataDir(), "-U", Superuser,
		"--pwfile", pwFile, "--auth-host=scram-sha-256", "--auth-local=scram-sha-256", "-E", "UTF8",
		"--locale=C", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb %s: %w\n%s", s.dataDir(), err, out)
	}
	return s.chown()
}

// chown gives the directory to the user postgres runs as, when that is not this process's,
// and lets that user pass through its parents (search permission only: e.g. bin/embedded,
// which the embedded control plane creates private).
func (s *Server) chown() error {
	if s.cred == nil {
		return nil
	}
	for p := filepath.Dir(s.opts.Dir); p != filepath.Dir(p); p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(p, st.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("letting PostgreSQL's user reach %s: %w", s.opts.Dir, err)
			}
		}
	}
	return filepath.Walk(s.opts.Dir, func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(s.cred.Uid), int(s.cred.Gid))
	})
}

// Start starts the server (again, after Stop) and waits until it accepts connections.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	args := []string{"-D", s.dataDir(), "-p", strconv.Itoa(s.port), "-k", s.runDir(),
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "shared_buffers=32MB"}
	if s.opts.Throwaway {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	}
	cmd := exec.Command(filepath.Join(s.opts.BinDir, postgresBinary), args...)
	// Its own process group: a Ctrl-C in the terminal reaches the manager, which stops it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if s.opts.Log != nil {
		cmd.Stdout, cmd.Stderr = s.opts.Log, s.opts.Log
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	for {
		conn, err := pgconn.Connect(ctx, s.URL(postgresBinary))
		if err == nil {
			_ = conn.Close(ctx)
			return nil
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("postgres exited while starting (its log: %s): %w", s.logHint(), err)
		case <-ctx.Done():
			return errors.Join(ctx.Err(), s.stopLocked())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) logHint() string {
	if s.opts.Log == nil {
		return "discarded"
	}
	return "above"
}

// Stop shuts the server down (fast shutdown: open connections are closed) and waits for it.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopLocked()
}

func (s *Server) stopLocked() error {
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
	return nil
}

// Port is the TCP port the server listens on (127.0.0.1).
func (s *Server) Port() int { return s.port }

// URL is the address of database on this server, as its superuser, with the password.
func (s *Server) URL(database string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(Superuser, s.password),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), Path: "/" + database, RawQuery: "sslmode=disable"}
	return u.String()
}

// Redacted is URL without the password, for logs and the terminal.
func (s *Server) Redacted(database string) string {
	u, _ := url.Parse(s.URL(database))
	return u.Redacted()
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

package mail

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

func TestMaildirWritesOneRFC5322MessagePerFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mail")
	d, err := NewMaildir(dir, "Flexsite <no-reply@flexsite.test>")
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{"a@example.com", "b@example.com"} {
		if err := d.Send(context.Background(), Message{To: to, Subject: "Your code", Text: "Your code is 123456."}); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"tmp", "cur"} {
		if left, _ := os.ReadDir(filepath.Join(dir, sub)); len(left) != 0 {
			t.Errorf("%s holds %d files, want none", sub, len(left))
		}
	}
	files, err := os.ReadDir(filepath.Join(dir, "new"))
	if err != nil || len(files) != 2 {
		t.Fatalf("new holds %d files (%v), want 2", len(files), err)
	}
	seen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(dir, "new", f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := mail.ReadMessage(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s is not an RFC 5322 message: %v", f.Name(), err)
		}
		for _, h := range []string{"From", "To", "Subject", "Date", "Message-Id"} {
			if msg.Header.Get(h) == "" {
				t.Errorf("%s: no %s header", f.Name(), h)
			}
		}
		if _, err := msg.Header.Date(); err != nil {
			t.Errorf("%s: Date: %v", f.Name(), err)
		}
		body, _ := io.ReadAll(msg.Body)
		if !strings.Contains(string(body), "123456") {
			t.Errorf("%s: body %q lacks the code", f.Name(), body)
		}
		to, _ := mail.ParseAddress(msg.Header.Get("To"))
		seen[to.Address] = true
	}
	if !seen["a@example.com"] || !seen["b@example.com"] {
		t.Errorf("recipients %v", seen)
	}
}

func TestMaildirRefusesABadRecipient(t *testing.T) {
	d, err := NewMaildir(t.TempDir(), "no-reply@flexsite.test")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Send(context.Background(), Message{To: "not an address", Subject: "s", Text: "t"}); err == nil {
		t.Fatal("a bad recipient must be refused")
	}
}

// The SMTP mailer is tested against github.com/emersion/go-smtp's server on loopback, with
// STARTTLS (a certificate made here) and AUTH PLAIN.

type received struct {
	mu       sync.Mutex
	from     string
	to       []string
	data     []byte
	authUser string
}

type backend struct{ r *received }

func (b backend) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{r: b.r}, nil }

type session struct {
	r    *received
	user string
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, username, password string) error {
		if username != "flexsite" || password != "s3cret" {
			return errors.New("bad credentials")
		}
		s.user = username
		return nil
	}), nil
}
func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.from = from
	return nil
}
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.to = append(s.r.to, to)
	return nil
}
func (s *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.r.data, s.r.authUser = data, s.user
	return err
}
func (s *session) Reset()        {}
func (s *session) Logout() error { return nil }

func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

func startServer(t *testing.T, withTLS bool) (*received, int, *x509.CertPool) {
	t.Helper()
	r := &received{}
	srv := smtp.NewServer(backend{r})
	srv.Domain = "localhost"
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	cert, pool := selfSigned(t)
	if withTLS {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	} else {
		srv.AllowInsecureAuth = true
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return r, ln.Addr().(*net.TCPAddr).Port, pool
}

func TestSMTPDeliversWithSTARTTLSAndAuth(t *testing.T) {
	r, port, pool := startServer(t, true)
	m, err := NewSMTP(SMTPConfig{Host: "127.0.0.1", Port: port, From: "no-reply@flexsite.test",
		Username: "flexsite", Password: "s3cret", TLS: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12},
		Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Send(context.Background(), Message{To: "household@example.com", Subject: "Your code", Text: "Your code is 654321."}); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.from != "no-reply@flexsite.test" || len(r.to) != 1 || r.to[0] != "household@example.com" {
		t.Errorf("envelope from %q to %v", r.from, r.to)
	}
	if r.authUser != "flexsite" {
		t.Errorf("authenticated as %q", r.authUser)
	}
	msg, err := mail.ReadMessage(bytes.NewReader(r.data))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(msg.Body)
	if msg.Header.Get("Subject") != "Your code" || !strings.Contains(string(body), "654321") {
		t.Errorf("message %q", r.data)
	}
}

func TestSMTPRefusesAServerWithoutSTARTTLS(t *testing.T) {
	r, port, _ := startServer(t, false)
	m, err := NewSMTP(SMTPConfig{Host: "127.0.0.1", Port: port, From: "no-reply@flexsite.test",
		Username: "flexsite", Password: "s3cret", Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Send(context.Background(), Message{To: "household@example.com", Subject: "s", Text: "t"}); err == nil {
		t.Fatal("delivery without STARTTLS must fail")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.data != nil || r.authUser != "" {
		t.Fatal("nothing may reach a server without TLS")
	}
}

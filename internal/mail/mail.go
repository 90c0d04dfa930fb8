// Package mail sends the few messages Flexsite writes to households (the rewards page's
// six-digit codes): through an SMTP server with STARTTLS (SMTP), or, on a developer's machine,
// into a Maildir (Maildir) so that nothing leaves it. Messages are built by
// github.com/wneessen/go-mail as RFC 5322 text; message bodies are never logged.
package mail

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	gomail "github.com/wneessen/go-mail"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Message is one plain-text email to one recipient.
type Message struct {
	To      string
	Subject string
	Text    string
}

// Mailer delivers messages.
type Mailer interface {
	Send(ctx context.Context, m Message) error
}

// build renders m as an RFC 5322 message from the sender.
func build(from string, m Message) (*gomail.Msg, error) {
	msg := gomail.NewMsg()
	if err := msg.From(from); err != nil {
		return nil, fmt.Errorf("sender: %w", err)
	}
	if err := msg.To(m.To); err != nil {
		return nil, fmt.Errorf("recipient: %w", err)
	}
	msg.Subject(m.Subject)
	msg.SetDate()
	msg.SetMessageID()
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	return msg, nil
}

// Maildir delivers each message as one file in Dir/new, written in Dir/tmp first and renamed
// (the Maildir convention: a reader never sees half a message).
type Maildir struct {
	Dir  string
	From string
	seq  atomic.Uint64
}

// NewMaildir creates (if needed) the Maildir's tmp, new and cur directories.
func NewMaildir(dir, from string) (*Maildir, error) {
	for _, sub := range []string{"tmp", "new", "cur"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	return &Maildir{Dir: dir, From: from}, nil
}

// Send writes m into the Maildir.
func (d *Maildir) Send(_ context.Context, m Message) error {
	msg, err := build(d.From, m)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := msg.WriteTo(&buf); err != nil {
		return err
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "localhost"
	}
	name := strconv.FormatInt(time.Now().UnixNano(), 10) + "." + strconv.FormatUint(d.seq.Add(1), 10) + "_" +
		rand.Text() + "." + host
	tmp := filepath.Join(d.Dir, "tmp", name)
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(d.Dir, "new", name)); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// SecretCredentials reads SMTP credentials from the keys username and password of a Secret.
func SecretCredentials(r client.Reader, key client.ObjectKey) func(ctx context.Context) (string, string, error) {
	return func(ctx context.Context) (string, string, error) {
		secret := &corev1.Secret{}
		if err := r.Get(ctx, key, secret); err != nil {
			return "", "", err
		}
		return string(secret.Data["username"]), string(secret.Data["password"]), nil
	}
}

// SMTPConfig is how to reach the mail server.
type SMTPConfig struct {
	Host string
	Port int
	From string
	// Username and Password authenticate (SMTP AUTH PLAIN, only over TLS); both empty: no AUTH.
	Username, Password string
	// Credentials, when set, give the username and password for each delivery instead (read
	// from a Secret, so that a rotated password is used without a restart).
	Credentials func(ctx context.Context) (username, password string, err error)
	// TLS configures the STARTTLS handshake (nil: the system's roots, ServerName = Host).
	TLS *tls.Config
	// Timeout bounds one delivery (default 30 s).
	Timeout time.Duration
}

// SMTP delivers through an SMTP server, always with STARTTLS: a server that does not offer
// it gets nothing, credentials included.
type SMTP struct{ cfg SMTPConfig }

// NewSMTP returns a mailer for cfg.
func NewSMTP(cfg SMTPConfig) (*SMTP, error) {
	if cfg.Host == "" || cfg.From == "" {
		return nil, errors.New("an SMTP mailer needs a host and a sender")
	}
	if cfg.Port == 0 {
		cfg.Port = 587
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	return &SMTP{cfg: cfg}, nil
}

// Send delivers m.
func (s *SMTP) Send(ctx context.Context, m Message) error {
	msg, err := build(s.cfg.From, m)
	if err != nil {
		return err
	}
	tlsConfig := s.cfg.TLS
	if tlsConfig == nil {
		tlsConfig = &tls.Config{ServerName: s.cfg.Host, MinVersion: tls.VersionTLS12}
	}
	opts := []gomail.Option{
		gomail.WithPort(s.cfg.Port), gomail.WithTLSPolicy(gomail.TLSMandatory), gomail.WithTLSConfig(tlsConfig),
		gomail.WithTimeout(s.cfg.Timeout),
	}
	username, password := s.cfg.Username, s.cfg.Password
	if s.cfg.Credentials != nil {
		if username, password, err = s.cfg.Credentials(ctx); err != nil {
			return fmt.Errorf("SMTP credentials: %w", err)
		}
	}
	if username != "" || password != "" {
		opts = append(opts, gomail.WithSMTPAuth(gomail.SMTPAuthPlain),
			gomail.WithUsername(username), gomail.WithPassword(password))
	}
	c, err := gomail.NewClient(s.cfg.Host, opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return c.DialAndSendWithContext(ctx, msg)
}

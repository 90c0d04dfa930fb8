package main

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/mail"
)

// mailOptions say where the mail the REST API writes to households (the rewards page's
// six-digit codes) goes: an SMTP server with STARTTLS, or a Maildir on this machine.
type mailOptions struct {
	smtpHost, smtpFrom, smtpSecret string
	smtpPort                       int
	mailDir                        string
	publicURL                      string
}

func (m *mailOptions) bind(fs *flag.FlagSet) {
	fs.StringVar(&m.smtpHost, "smtp-host", "", "SMTP server for mail to households (STARTTLS is required); empty: no SMTP.")
	fs.IntVar(&m.smtpPort, "smtp-port", 587, "Port of --smtp-host (submission, STARTTLS).")
	fs.StringVar(&m.smtpFrom, "smtp-from", "Flexsite <no-reply@flexsite.local>", "Sender of mail to households.")
	fs.StringVar(&m.smtpSecret, "smtp-credentials-secret", "",
		"namespace/name of a Secret whose keys username and password authenticate to --smtp-host (read for each message).")
	fs.StringVar(&m.mailDir, "mail-dir", "",
		"Deliver mail to households into this Maildir instead of SMTP (one RFC 5322 message per file in new/). "+
			"With --embedded and no --smtp-host the default is bin/embedded/mail.")
	fs.StringVar(&m.publicURL, "public-url", "",
		"Scheme and host the rewards links and the dispatches' status callbacks point at, e.g. https://api.flexsite.example "+
			"(default: the request's host; for the callbacks, http:// and --api-addr).")
}

// mailer builds the configured Mailer (nil when mail is not configured).
func (m *mailOptions) mailer(embedded bool, reader client.Reader, log logr.Logger) (mail.Mailer, error) {
	switch {
	case m.smtpHost != "":
		cfg := mail.SMTPConfig{Host: m.smtpHost, Port: m.smtpPort, From: m.smtpFrom}
		if m.smtpSecret != "" {
			ns, name, ok := strings.Cut(m.smtpSecret, "/")
			if !ok || ns == "" || name == "" {
				return nil, fmt.Errorf("--smtp-credentials-secret must be namespace/name, not %q", m.smtpSecret)
			}
			cfg.Credentials = mail.SecretCredentials(reader, client.ObjectKey{Namespace: ns, Name: name})
		}
		log.Info("mail to households goes through SMTP with STARTTLS", "host", m.smtpHost, "port", m.smtpPort)
		return mail.NewSMTP(cfg)
	case m.mailDir == "" && embedded:
		m.mailDir = filepath.Join("bin", "embedded", "mail")
	case m.mailDir == "":
		log.Info("no mail configured (--smtp-host or --mail-dir): rewards links that enforce an emailed code cannot send one")
		return nil, nil
	}
	dir, err := filepath.Abs(m.mailDir)
	if err != nil {
		return nil, err
	}
	d, err := mail.NewMaildir(dir, m.smtpFrom)
	if err != nil {
		return nil, err
	}
	log.Info("mail to households is delivered to a Maildir, not sent", "maildir", filepath.Join(dir, "new"))
	fmt.Printf("Mail to households (rewards codes) is written to %s\n", filepath.Join(dir, "new"))
	return d, nil
}

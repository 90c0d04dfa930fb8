package events_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"syscall"
	"testing"

	"github.com/flexsite/flexsite/internal/events"
)

// What the organisation is told of a failed delivery names no address, no resolver and no
// internal error text (issue 47): only the generic words of events.DeliveryErrorText.
func TestDeliveryErrorText(t *testing.T) {
	post := func(err error) error {
		return &url.Error{Op: "Post", URL: "https://hooks.example.com/x", Err: err}
	}
	dial := func(addr string, err error) error {
		return post(&net.OpError{Op: "dial", Net: "tcp", Addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(addr)), Err: err})
	}
	policy := events.AddressPolicy{}
	refused := policy.Control("tcp", "10.0.0.7:443", nil)
	metadata := policy.Check(netip.MustParseAddr("64:ff9b::a9fe:a9fe"))
	for _, tc := range []struct {
		name string
		err  error
		code int
		want string
	}{
		{"a receiver's 503", errors.New("receiver answered 503"), 503, "HTTP 503"},
		{"a receiver's 410", errors.New("receiver answered 410"), 410, "HTTP 410"},
		{"a private address", dial("10.0.0.7:443", refused), 0, events.DeliveryAddressRefused},
		{"the metadata service inside NAT64", dial("[64:ff9b::a9fe:a9fe]:443", metadata), 0, events.DeliveryAddressRefused},
		{"a name not found", post(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host",
			Name: "internal.svc.cluster.local", Server: "10.96.0.10:53", IsNotFound: true}}), 0, events.DeliveryHostNotFound},
		{"a resolver failing", post(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "server misbehaving",
			Name: "x.example", Server: "10.96.0.10:53"}}), 0, events.DeliveryDNSFailed},
		{"a resolver timing out", post(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "i/o timeout",
			Name: "x.example", Server: "10.96.0.10:53", IsTimeout: true}}), 0, events.DeliveryTimedOut},
		{"connection refused", dial("192.0.2.10:443", os.NewSyscallError("connect", syscall.ECONNREFUSED)), 0,
			events.DeliveryConnRefused},
		{"connection reset", dial("192.0.2.10:443", os.NewSyscallError("read", syscall.ECONNRESET)), 0, events.DeliveryConnReset},
		{"no route", dial("192.0.2.10:443", os.NewSyscallError("connect", syscall.EHOSTUNREACH)), 0, events.DeliveryUnreachable},
		{"the attempt's deadline", post(context.DeadlineExceeded), 0, events.DeliveryTimedOut},
		{"an i/o timeout", dial("192.0.2.10:443", os.ErrDeadlineExceeded), 0, events.DeliveryTimedOut},
		{"an unknown authority", post(&tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), 0,
			events.DeliveryCertificate},
		{"a certificate for another name", post(x509.HostnameError{Host: "10.0.0.7", Certificate: &x509.Certificate{}}), 0,
			events.DeliveryCertificate},
		{"not TLS at all", post(tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}), 0,
			events.DeliveryTLSFailed},
		{"a TLS alert", post(fmt.Errorf("remote error: %w", tls.AlertError(40))), 0, events.DeliveryTLSFailed},
		{"the signing secret", fmt.Errorf("%w: reading it: secrets \"s\" is forbidden: User \"system:serviceaccount:flexsite:manager\"",
			events.ErrSigningSecret), 0, events.DeliverySigningSecret},
		{"anything else", errors.New("http: server gave HTTP response to HTTPS client at 10.0.0.7:80"), 0, events.DeliveryFailed},
		{"no error", nil, 0, ""},
	} {
		got := events.DeliveryErrorText(tc.err, tc.code)
		if got != tc.want {
			t.Errorf("%s: DeliveryErrorText(%v) = %q, want %q", tc.name, tc.err, got, tc.want)
		}
		if ip.MatchString(got) {
			t.Errorf("%s: %q names an address", tc.name, got)
		}
	}
}

// ip matches an IPv4 address, an IPv6 one, or a host name with a dot.
var ip = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+|[0-9a-f]*:[0-9a-f]*:|[a-z0-9-]+\.[a-z]{2,}`)

// An error stored before the generic words (the error verbatim) is shown as "delivery failed".
func TestPublicDeliveryError(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "HTTP 503": "HTTP 503", "HTTP 410": "HTTP 410", "host not found": "host not found",
		"address not allowed": "address not allowed", "TLS certificate not trusted": "TLS certificate not trusted",
		`Post "https://x.invalid/": dial tcp: lookup x.invalid on 10.96.0.10:53: no such host`: "delivery failed",
		"receiver answered 503": "delivery failed", "HTTP 5030": "delivery failed", "http 503": "delivery failed",
	} {
		if got := events.PublicDeliveryError(in); got != want {
			t.Errorf("PublicDeliveryError(%q) = %q, want %q", in, got, want)
		}
	}
}

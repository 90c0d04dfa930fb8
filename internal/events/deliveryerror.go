package events

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
)

// ErrAddressRefused marks a connection refused by the AddressPolicy (Check, Control).
var ErrAddressRefused = errors.New("refused")

// ErrSigningSecret marks a delivery not attempted because the subscription's signing secret
// cannot be used.
var ErrSigningSecret = errors.New("signing secret")

// The generic words of a failed delivery, as the organisation is told them.
const (
	DeliveryAddressRefused  = "address not allowed"
	DeliveryHostNotFound    = "host not found"
	DeliveryDNSFailed       = "DNS lookup failed"
	DeliveryTimedOut        = "timed out"
	DeliveryConnRefused     = "connection refused"
	DeliveryConnReset       = "connection reset"
	DeliveryUnreachable     = "network unreachable"
	DeliveryTLSFailed       = "TLS handshake failed"
	DeliveryCertificate     = "TLS certificate not trusted"
	DeliverySigningSecret   = "signing secret missing or unusable"
	DeliveryConnectionError = "connection failed"
	DeliveryFailed          = "delivery failed"
)

// DeliveryErrorText is what the organisation is told of a failed delivery attempt (a
// subscription's status, its deliveries' list): generic words that name no address, no
// resolved name, no resolver and no internal error text, so that a receiver URL cannot be
// used to map what the cluster reaches or resolves. statusCode is the receiver's answer (0:
// none): "HTTP 503". The whole error is for the manager's log only.
func DeliveryErrorText(err error, statusCode int) string {
	if statusCode != 0 {
		return fmt.Sprintf("HTTP %d", statusCode)
	}
	if err == nil {
		return ""
	}
	var dnsErr *net.DNSError
	var certErr *tls.CertificateVerificationError
	var unknownAuthority x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var recordHeader tls.RecordHeaderError
	var alert tls.AlertError
	var netErr net.Error
	switch {
	case errors.Is(err, ErrSigningSecret):
		return DeliverySigningSecret
	case errors.Is(err, ErrAddressRefused):
		return DeliveryAddressRefused
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return DeliveryHostNotFound
		}
		if dnsErr.IsTimeout {
			return DeliveryTimedOut
		}
		return DeliveryDNSFailed
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return DeliveryTimedOut
	case errors.Is(err, syscall.ECONNREFUSED):
		return DeliveryConnRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return DeliveryConnReset
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return DeliveryUnreachable
	case errors.As(err, &certErr), errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalid):
		return DeliveryCertificate
	case errors.As(err, &recordHeader), errors.As(err, &alert), strings.Contains(err.Error(), "tls: "):
		return DeliveryTLSFailed
	case errors.As(err, &netErr):
		return DeliveryConnectionError
	}
	return DeliveryFailed
}

// deliveryWords are DeliveryErrorText's answers but the receiver's status.
var deliveryWords = []string{DeliveryAddressRefused, DeliveryHostNotFound, DeliveryDNSFailed, DeliveryTimedOut,
	DeliveryConnRefused, DeliveryConnReset, DeliveryUnreachable, DeliveryTLSFailed, DeliveryCertificate,
	DeliverySigningSecret, DeliveryConnectionError, DeliveryFailed}

var httpStatusWords = regexp.MustCompile(`^HTTP [1-5][0-9][0-9]$`)

// PublicDeliveryError is what the organisation is shown of a stored error: itself when it is
// one of DeliveryErrorText's answers, else DeliveryFailed. An attempt recorded before the
// errors were worded generically (the error verbatim, addresses and all) is shown so too.
func PublicDeliveryError(stored string) string {
	if stored == "" || slices.Contains(deliveryWords, stored) || httpStatusWords.MatchString(stored) {
		return stored
	}
	return DeliveryFailed
}

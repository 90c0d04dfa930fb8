package pagestore

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/sealing"
)

// The bank details are sealed with internal/sealing's key ring, in a key Secret of their own.
const (
	// DefaultKeysSecret is the name of the bank details key Secret in the manager's namespace.
	DefaultKeysSecret = "flexsite-bank-keys"
	// ActiveEntry and KeySuffix are the key Secret's entries (sealing's).
	ActiveEntry = sealing.ActiveEntry
	KeySuffix   = sealing.KeySuffix
)

// KeyRing holds the keys that seal bank details (sealing's).
type KeyRing = sealing.KeyRing

// ErrUnknownKey is a row sealed with a key id the key Secret no longer holds.
var ErrUnknownKey = sealing.ErrUnknownKey

// NewKeyRing returns the bank details key ring kept in the Secret namespace/name.
func NewKeyRing(reader client.Reader, writer client.Client, namespace, name string) *KeyRing {
	return sealing.NewKeyRing(reader, writer, namespace, name, "bank details")
}

// NewKey and ParseKeys are sealing's.
var (
	NewKey    = sealing.NewKey
	ParseKeys = sealing.ParseKeys
)

package meters

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"time"
)

// RefLifetime is how long a search's reference may be used (spec/meters.md).
const RefLifetime = time.Hour

// Ref is what a search's reference stands for: a meter point's MPAN, shown to one
// organisation, until Expires. It is sealed (authenticated encryption, internal/sealing's
// keys) so that the MPAN never shows in a search answer and a reference can be neither forged,
// altered, nor used by another organisation or after its time.
type Ref struct {
	MPAN         string
	Organisation string
	Expires      time.Time
}

// refVersion is the first byte of a reference's plaintext and of its additional data, so a
// later format can never be read as this one.
const refVersion = 1

// ErrBadRef is a reference that cannot be one of ours: the caller is told only "not found".
var ErrBadRef = errors.New("not a meter reference")

// Plaintext is what is sealed: the version, the expiry (Unix seconds) and the MPAN.
func (r Ref) Plaintext() []byte {
	out := make([]byte, 0, 1+8+len(r.MPAN))
	out = append(out, refVersion)
	out = binary.BigEndian.AppendUint64(out, uint64(r.Expires.Unix()))
	return append(out, r.MPAN...)
}

// AdditionalData binds a sealed reference to its organisation: opened for another, it fails.
func (r Ref) AdditionalData() []byte {
	return append([]byte{refVersion, 'm', 'e', 't', 'e', 'r', 0}, r.Organisation...)
}

// ReadRef reads a reference's opened plaintext for organisation; it is ErrBadRef when it is
// not one, and expired at now.
func ReadRef(plaintext []byte, organisation string, now time.Time) (Ref, error) {
	if len(plaintext) != 1+8+13 || plaintext[0] != refVersion {
		return Ref{}, ErrBadRef
	}
	r := Ref{Organisation: organisation, MPAN: string(plaintext[9:]),
		Expires: time.Unix(int64(binary.BigEndian.Uint64(plaintext[1:9])), 0)}
	if !now.Before(r.Expires) {
		return Ref{}, ErrBadRef
	}
	return r, nil
}

// refEncoding is URL- and path-safe, and strict: a reference has exactly one spelling, so a
// changed character is always a changed reference.
var refEncoding = base64.RawURLEncoding.Strict()

// maxRefLength bounds what is decoded at all: a key id of up to 64 bytes, a nonce, the
// plaintext and its tag come to well under 200 characters.
const maxRefLength = 256

func notInRefAlphabet(r rune) bool {
	return (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '_'
}

// EncodeRef writes a sealed reference: the key id's length and the key id, the nonce, and the
// ciphertext, in unpadded URL-safe base64.
func EncodeRef(kid string, nonce, ciphertext []byte) string {
	raw := make([]byte, 0, 1+len(kid)+len(nonce)+len(ciphertext))
	raw = append(raw, byte(len(kid)))
	raw = append(raw, kid...)
	raw = append(raw, nonce...)
	raw = append(raw, ciphertext...)
	return refEncoding.EncodeToString(raw)
}

// DecodeRef reads what EncodeRef wrote, for a nonce of nonceSize bytes; ErrBadRef when it
// cannot be.
func DecodeRef(s string, nonceSize int) (kid string, nonce, ciphertext []byte, err error) {
	// Only the alphabet's own characters: the decoder skips line breaks, even when strict,
	// so "ab\ncd" would otherwise be a second spelling of "abcd".
	if len(s) > maxRefLength || strings.IndexFunc(s, notInRefAlphabet) >= 0 {
		return "", nil, nil, ErrBadRef
	}
	raw, err := refEncoding.DecodeString(s)
	if err != nil || len(raw) < 1 {
		return "", nil, nil, ErrBadRef
	}
	n := int(raw[0])
	if n == 0 || len(raw) < 1+n+nonceSize+1 {
		return "", nil, nil, ErrBadRef
	}
	return string(raw[1 : 1+n]), raw[1+n : 1+n+nonceSize], raw[1+n+nonceSize:], nil
}

// MaskedMPAN is an MPAN as a household is shown it: every digit hidden but the last four.
func MaskedMPAN(mpan string) string {
	if len(mpan) <= 4 {
		return strings.Repeat("•", len(mpan))
	}
	return strings.Repeat("•", len(mpan)-4) + mpan[len(mpan)-4:]
}

package meters

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strings"
	"time"
)

// RefLifetime is how long a search's reference may be used (docs/api.md, "Meters: finding a
// household's meter").
const RefLifetime = time.Hour

// Ref is what a search's reference stands for: a meter point's MPAN at the postcode that was
// searched, shown to one organisation, until Expires. It is sealed (authenticated encryption,
// internal/sealing's keys) so that the MPAN never shows in a search answer and a reference can
// be neither forged, altered, nor used by another organisation or after its time. The postcode
// lets a household's address step check that the meter it picked is at the postcode it saves
// (SamePostcode).
type Ref struct {
	MPAN string
	// Postcode is the searched postcode, normalised (validation.NormalisePostcode); "" in a
	// reference of the first format, which did not carry it.
	Postcode     string
	Organisation string
	Expires      time.Time
}

// refVersion is the first byte of a reference's plaintext, so a later format can never be read
// as this one: 2 carries the postcode after the MPAN; 1 (the MPAN alone) is still read, so that
// references issued before an upgrade keep working for their hour.
const (
	refVersion       = 2
	refVersionNoCode = 1
	// adVersion is the first byte of the additional data, which has not changed since the
	// first format: a reference of either format opens with the same additional data.
	adVersion = 1
	// maxPostcodeBytes bounds the sealed postcode: a normalised UK postcode is at most 8.
	maxPostcodeBytes = 8
)

// ErrBadRef is a reference that cannot be one of ours: the caller is told only "not found".
var ErrBadRef = errors.New("not a meter reference")

// Plaintext is what is sealed: the version, the expiry (Unix seconds), the MPAN (13 digits)
// and the postcode.
func (r Ref) Plaintext() []byte {
	out := make([]byte, 0, 1+8+len(r.MPAN)+len(r.Postcode))
	out = append(out, refVersion)
	out = binary.BigEndian.AppendUint64(out, uint64(r.Expires.Unix()))
	out = append(out, r.MPAN...)
	return append(out, r.Postcode...)
}

// AdditionalData binds a sealed reference to its organisation: opened for another, it fails.
func (r Ref) AdditionalData() []byte {
	return append([]byte{adVersion, 'm', 'e', 't', 'e', 'r', 0}, r.Organisation...)
}

// ReadRef reads a reference's opened plaintext for organisation; it is ErrBadRef when it is
// not one, and expired at now.
func ReadRef(plaintext []byte, organisation string, now time.Time) (Ref, error) {
	const head = 1 + 8 + 13
	if len(plaintext) < head {
		return Ref{}, ErrBadRef
	}
	switch plaintext[0] {
	case refVersionNoCode:
		if len(plaintext) != head {
			return Ref{}, ErrBadRef
		}
	case refVersion:
		if n := len(plaintext) - head; n == 0 || n > maxPostcodeBytes {
			return Ref{}, ErrBadRef
		}
	default:
		return Ref{}, ErrBadRef
	}
	r := Ref{Organisation: organisation, MPAN: string(plaintext[9:head]), Postcode: string(plaintext[head:]),
		Expires: time.Unix(int64(binary.BigEndian.Uint64(plaintext[1:9])), 0)}
	if !now.Before(r.Expires) {
		return Ref{}, ErrBadRef
	}
	return r, nil
}

// SamePostcode tells whether the reference's meter point is at postcode (normalised): a
// reference of the first format, which does not say, is at none.
func (r Ref) SamePostcode(postcode string) bool {
	return r.Postcode != "" && r.Postcode == postcode
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

// Viewer is whom an answer that names a meter point's MPAN goes to.
type Viewer uint8

const (
	// HouseholdViewer is an end user (a component token: the hosted flow, or the REST routes
	// such a token reaches). It is shown its MPAN masked (MaskedMPAN): a household that picked
	// a neighbour's meter from a search, or typed a number, never learns a full MPAN from an
	// answer. The zero value, so that a viewer not said is shown the least.
	HouseholdViewer Viewer = iota
	// OrganisationViewer is the organisation's own API client, which registers its households'
	// MPANs and reads them back in full.
	OrganisationViewer
)

// MPANFor is an MPAN as viewer v may see it: in full for the organisation, masked but for its
// last four digits for a household; "" stays "".
func MPANFor(v Viewer, mpan string) string {
	if v == OrganisationViewer {
		return mpan
	}
	return MaskedMPAN(mpan)
}

// MaskedMPAN is an MPAN as a household is shown it: every digit hidden but the last four.
func MaskedMPAN(mpan string) string {
	if len(mpan) <= 4 {
		return strings.Repeat("•", len(mpan))
	}
	return strings.Repeat("•", len(mpan)-4) + mpan[len(mpan)-4:]
}

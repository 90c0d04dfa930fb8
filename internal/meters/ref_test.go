package meters_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/meters"
)

const nonceSize = 12 // sealing.NonceSize: AES-GCM's

func TestRefPlaintextRoundTrip(t *testing.T) {
	expires := time.Date(2026, 11, 27, 21, 0, 0, 0, time.UTC)
	ref := meters.Ref{MPAN: validMPAN, Postcode: "SW1A 1AA", Organisation: "org-a", Expires: expires}
	plaintext := ref.Plaintext()

	got, err := meters.ReadRef(plaintext, "org-a", expires.Add(-time.Second))
	if err != nil || got.MPAN != ref.MPAN || got.Postcode != ref.Postcode || got.Organisation != ref.Organisation ||
		!got.Expires.Equal(expires) {
		t.Fatalf("ReadRef = %+v, %v; want %+v", got, err, ref)
	}
	// The first format (no postcode) is still read, at no postcode.
	first := append([]byte{1}, plaintext[1:1+8+13]...)
	if got, err := meters.ReadRef(first, "org-a", expires.Add(-time.Second)); err != nil || got.MPAN != validMPAN ||
		got.Postcode != "" || got.SamePostcode("") {
		t.Fatalf("ReadRef(first format) = %+v, %v", got, err)
	}
	noPostcode := meters.Ref{MPAN: validMPAN, Organisation: "org-a", Expires: expires}.Plaintext()
	for _, c := range []struct {
		name      string
		plaintext []byte
		now       time.Time
	}{
		{"at its expiry", plaintext, expires},
		{"after its expiry", plaintext, expires.Add(time.Nanosecond)},
		{"empty", nil, expires.Add(-time.Hour)},
		{"another version", append([]byte{3}, plaintext[1:]...), expires.Add(-time.Hour)},
		{"the first format with a postcode", append([]byte{1}, plaintext[1:]...), expires.Add(-time.Hour)},
		{"no postcode", noPostcode, expires.Add(-time.Hour)},
		{"cut short", plaintext[:1+8+12], expires.Add(-time.Hour)},
		{"too long", append(bytes.Clone(plaintext), "000"...), expires.Add(-time.Hour)},
	} {
		if got, err := meters.ReadRef(c.plaintext, "org-a", c.now); !errors.Is(err, meters.ErrBadRef) {
			t.Errorf("%s: %+v, %v; want ErrBadRef", c.name, got, err)
		}
	}
}

func TestRefAdditionalDataBindsTheOrganisation(t *testing.T) {
	a := meters.Ref{MPAN: validMPAN, Organisation: "org-a"}.AdditionalData()
	for _, other := range []string{"org-b", "org-", "org-a ", "", "org-aa"} {
		if bytes.Equal(a, meters.Ref{MPAN: validMPAN, Organisation: other}.AdditionalData()) {
			t.Errorf("organisation %q has org-a's additional data", other)
		}
	}
	if !bytes.Equal(a, meters.Ref{MPAN: "9999999999999", Organisation: "org-a"}.AdditionalData()) {
		t.Error("the additional data depends on more than the organisation")
	}
}

func TestEncodeDecodeRef(t *testing.T) {
	nonce := bytes.Repeat([]byte{7}, nonceSize)
	ct := []byte("ciphertext and its tag, whatever bytes\x00\xff")
	s := meters.EncodeRef("k2026", nonce, ct)
	if strings.ContainsAny(s, "+/=") {
		t.Errorf("%q is not URL- and path-safe unpadded base64", s)
	}
	kid, gotNonce, gotCT, err := meters.DecodeRef(s, nonceSize)
	if err != nil || kid != "k2026" || !bytes.Equal(gotNonce, nonce) || !bytes.Equal(gotCT, ct) {
		t.Fatalf("DecodeRef = %q, %x, %x, %v", kid, gotNonce, gotCT, err)
	}

	// A reference whose last character carries spare bits: setting one must be refused, not
	// read as the same reference (strict decoding: one spelling per reference).
	var spare string
	for n := 1; ; n++ {
		if spare = meters.EncodeRef("k", nonce, bytes.Repeat([]byte{1}, n)); len(spare)%4 != 0 {
			break
		}
	}
	last := spare[len(spare)-1]
	nonStrict := spare[:len(spare)-1] + string(rune(last+1))

	for _, c := range []struct{ name, s string }{
		{"empty", ""},
		{"not base64", "!!!!"},
		{"standard base64's characters", strings.ReplaceAll(strings.ReplaceAll(s, "-", "+"), "_", "/") + "+/"},
		{"padded", s + "=="},
		{"padding inside", s[:4] + "=" + s[5:]},
		{"spare bits set", nonStrict},
		{"too long", meters.EncodeRef("k", nonce, bytes.Repeat([]byte{1}, 300))},
		{"a key id of length 0", meters.EncodeRef("", nonce, ct)},
		{"no ciphertext", meters.EncodeRef("k", nonce, nil)},
		{"a nonce cut short", meters.EncodeRef("k", nonce[:5], nil)},
		{"a key id longer than the rest", meters.EncodeRef(strings.Repeat("k", 40), nil, nil)},
		{"whitespace", s[:8] + " " + s[8:]},
		{"a line break", s[:8] + "\n" + s[8:]},
	} {
		if kid, _, _, err := meters.DecodeRef(c.s, nonceSize); !errors.Is(err, meters.ErrBadRef) {
			t.Errorf("%s (%q): kid %q, %v; want ErrBadRef", c.name, c.s, kid, err)
		}
	}
}

// FuzzDecodeRef: any text is a reference's parts or ErrBadRef, never a panic, and a text that
// decodes is the one spelling of its parts.
func FuzzDecodeRef(f *testing.F) {
	nonce := bytes.Repeat([]byte{7}, nonceSize)
	f.Add(meters.EncodeRef("k1", nonce, meters.Ref{MPAN: validMPAN, Expires: time.Unix(1e9, 0)}.Plaintext()))
	f.Add("")
	f.Add("AAAA")
	f.Add("AQ==")
	f.Add(strings.Repeat("_", 300))
	f.Fuzz(func(t *testing.T, s string) {
		kid, n, ct, err := meters.DecodeRef(s, nonceSize)
		if err != nil {
			if !errors.Is(err, meters.ErrBadRef) {
				t.Fatalf("DecodeRef(%q): %v, want ErrBadRef", s, err)
			}
			return
		}
		if again := meters.EncodeRef(kid, n, ct); again != s {
			t.Fatalf("DecodeRef(%q) re-encodes as %q", s, again)
		}
		// The ciphertext read as a plaintext (as a forged unsealed reference would be): a
		// reference or ErrBadRef, never a panic.
		if _, err := meters.ReadRef(ct, "org-a", time.Unix(0, 0)); err != nil && !errors.Is(err, meters.ErrBadRef) {
			t.Fatalf("ReadRef: %v", err)
		}
	})
}

func TestRefSamePostcode(t *testing.T) {
	ref := meters.Ref{MPAN: validMPAN, Postcode: "SW1A 1AA"}
	for postcode, want := range map[string]bool{"SW1A 1AA": true, "SW1A 1AB": false, "SW1A1AA": false, "": false} {
		if got := ref.SamePostcode(postcode); got != want {
			t.Errorf("SamePostcode(%q) = %v, want %v", postcode, got, want)
		}
	}
}

// TestMPANFor is the one rule of what a caller is shown of an MPAN: the organisation all of
// it, a household (and a viewer not said) the last four digits.
func TestMPANFor(t *testing.T) {
	var unsaid meters.Viewer
	for _, c := range []struct {
		viewer     meters.Viewer
		mpan, want string
	}{
		{meters.OrganisationViewer, validMPAN, validMPAN},
		{meters.OrganisationViewer, "", ""},
		{meters.HouseholdViewer, validMPAN, "•••••••••5967"},
		{meters.HouseholdViewer, "", ""},
		{unsaid, validMPAN, "•••••••••5967"},
		{meters.Viewer(7), validMPAN, "•••••••••5967"},
	} {
		if got := meters.MPANFor(c.viewer, c.mpan); got != c.want {
			t.Errorf("MPANFor(%d, %q) = %q, want %q", c.viewer, c.mpan, got, c.want)
		}
		if c.viewer != meters.OrganisationViewer && c.mpan != "" && strings.Contains(meters.MPANFor(c.viewer, c.mpan), c.mpan[:9]) {
			t.Errorf("MPANFor(%d) shows the MPAN's first digits", c.viewer)
		}
	}
}

func TestMaskedMPAN(t *testing.T) {
	for mpan, want := range map[string]string{
		validMPAN: "•••••••••5967",
		"12345":   "•2345",
		"1234":    "••••",
		"12":      "••",
		"":        "",
	} {
		if got := meters.MaskedMPAN(mpan); got != want {
			t.Errorf("MaskedMPAN(%q) = %q, want %q", mpan, got, want)
		}
	}
}

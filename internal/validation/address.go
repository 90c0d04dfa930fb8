package validation

import (
	"strings"
	"unicode"
)

// AddressKey is the key under which two sites count as being at the same address (POST
// /entities/site answers 409 for a second site of an organisation at one): the postcode
// without spaces, upper case, and the street address folded so that only its words and
// numbers count. Folding lower-cases, and turns every run of characters that are neither
// letters nor digits (punctuation, spaces) into one space, trimmed at both ends: "12, High
// St." and " 12 high  st " are one address. Nothing is expanded or split: an abbreviation is
// another word ("St" is not "Street"), and "12A" is not "12 A". A site
// without a street address has no key (""): it is at no address to compare.
func AddressKey(streetAddress, postcode string) string {
	street := foldAddress(streetAddress)
	if street == "" {
		return ""
	}
	pc := upperASCII(strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, postcode))
	return pc + "|" + street
}

// foldAddress lower-cases s and collapses every run of non-letters and non-digits into one
// space, trimmed.
func foldAddress(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	gap := false
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if gap && b.Len() > 0 {
				b.WriteByte(' ')
			}
			gap = false
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		gap = true
	}
	return b.String()
}

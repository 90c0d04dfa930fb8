package validation

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxAccountNameLength bounds a bank account holder's name (UK Faster Payments carries 140
// characters at most for the beneficiary's name; banks use far fewer).
const MaxAccountNameLength = 140

// NormaliseAccountName trims a bank account holder's name and refuses an empty, over-long or
// control-character one.
func NormaliseAccountName(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return "", newError("missing", "Enter the name on the account")
	case utf8.RuneCountInString(s) > MaxAccountNameLength:
		return "", newError("string_too_long", "The name on the account is longer than 140 characters")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return "", newError("value_error", "The name on the account has characters a bank does not take")
	}
	return s, nil
}

// digitsOf drops the separators people type in bank numbers (spaces and hyphens).
func digitsOf(s string) string {
	return strings.Map(func(r rune) rune {
		if r == ' ' || r == '-' {
			return -1
		}
		return r
	}, strings.TrimSpace(s))
}

// NormaliseSortCode reads a UK sort code (six digits, with or without hyphens or spaces) and
// returns it as 12-34-56.
func NormaliseSortCode(s string) (string, error) {
	d := digitsOf(s)
	if len(d) != 6 || !isASCIIDigits(d) {
		return "", newError("value_error", "Enter a sort code of 6 digits, like 12-34-56")
	}
	return d[0:2] + "-" + d[2:4] + "-" + d[4:6], nil
}

// NormaliseAccountNumber reads a UK bank account number: 8 digits (spaces allowed).
func NormaliseAccountNumber(s string) (string, error) {
	d := digitsOf(s)
	if len(d) != 8 || !isASCIIDigits(d) {
		return "", newError("value_error", "Enter an account number of 8 digits")
	}
	return d, nil
}

// MaskDigits shows only the last four characters of a bank number: ****5678.
func MaskDigits(s string) string {
	d := digitsOf(s)
	if len(d) <= 4 {
		return strings.Repeat("*", len(d))
	}
	return "****" + d[len(d)-4:]
}

package meters

import (
	"strings"
	"unicode"
)

// words are s's words as pg_trgm reads them: runs of letters and digits, lower-cased.
func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// TellingWords is what the by-address rule compares (Register.Ranked): for each address at
// a postcode, and for the address a caller gave, the words left once the words every one of
// the postcode's addresses holds are taken out, and the postcode's own. Those shared words
// (the street, the town, the postcode) say nothing about which meter point is meant, and they
// would drown the few that do: "Flat 3, Rose Court, 12 High Street, London, SW1A 1AA" and its
// neighbour Flat 4 are 0.94 similar in full, but "flat 3" and "flat 4" are 0.5. A postcode
// with one address shares nothing with another: only its postcode is taken out. The words
// of the given address after the first one they all share (its street, or its town) that
// none of them holds go too, numbers aside: a county, a district, or the town spelt otherwise
// say where the address is, not which it is, and would sink every address alike below
// MinSimilarity.
func TellingWords(addresses []string, postcode, given string) (telling []string, query string) {
	drop := map[string]bool{}
	for _, w := range words(postcode) {
		drop[w] = true
	}
	drop[strings.Join(words(postcode), "")] = true // "SW1A1AA", a postcode typed without its space
	each := make([][]string, len(addresses))
	for i, a := range addresses {
		each[i] = words(a)
	}
	count := map[string]int{} // how many of the addresses hold each word
	for _, ws := range each {
		seen := map[string]bool{}
		for _, w := range ws {
			if !seen[w] {
				seen[w] = true
				count[w]++
			}
		}
	}
	if len(addresses) > 1 {
		for w, n := range count {
			if n == len(addresses) {
				drop[w] = true
			}
		}
	}
	keep := func(ws []string) string {
		out := ws[:0:0]
		for _, w := range ws {
			if !drop[w] {
				out = append(out, w)
			}
		}
		return strings.Join(out, " ")
	}
	telling = make([]string, len(addresses))
	for i, ws := range each {
		telling[i] = keep(ws)
	}
	// After the first word every address holds (the street, or the town), a word none holds
	// says where the address is, not which: a county, a district, the town spelt otherwise.
	// Before it, such a word may be the very name that tells a house apart ("The Old
	// Rectory" beside "The Old Barn"), so it stays.
	givenWords := words(given)
	located := givenWords[:0:0]
	shared := false
	for _, w := range givenWords {
		if len(addresses) > 1 && count[w] == len(addresses) {
			shared = true
		}
		if shared && count[w] == 0 && !strings.ContainsFunc(w, unicode.IsDigit) {
			continue
		}
		located = append(located, w)
	}
	return telling, keep(located)
}

// HasNumbersOf tells whether telling words (one address's, from TellingWords) hold every
// number of the given address's: a number is what tells a flat or a house from its neighbour,
// so an address without one the household wrote is not theirs however alike the rest ("Flat
// 2, Mill House" is not "Flat 1, Mill House", 0.82 similar, when the register lacks Flat 2).
// A number with a letter holds its number ("12A" holds "12"); a number written twice must be
// held twice ("Flat 1, Riverside House, 1 Victoria Close" is not Flat 2 of the same block).
func HasNumbersOf(telling, query string) bool {
	held := map[string]int{} // as often as written: "Flat 1, ..., 1 Victoria Close" holds 1 twice
	for _, n := range numbersOf(telling) {
		held[n]++
	}
	for _, n := range numbersOf(query) {
		if held[n]--; held[n] < 0 {
			return false
		}
	}
	return true
}

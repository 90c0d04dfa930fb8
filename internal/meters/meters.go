// Package meters holds the rules of the meter-point register (docs/api.md, "Meters: finding a
// household's meter"): what a register row is and how it is checked, its one-line address, the
// natural order of a postcode's addresses, which building a household's identifier names, the
// markets a meter point may trade in, and when an address names one meter point. It has no client:
// the register itself is behind Register (internal/meterstore serves it from PostgreSQL), and the
// references a search answers are sealed by the use cases (internal/app/meterpoints).
package meters

import (
	"context"
	"errors"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agnivade/levenshtein"

	"github.com/flexsite/flexsite/internal/validation"
)

// Point is one meter point of the register: its MPAN (13 digits, check digit valid), its
// address as the register holds it, its postcode normalised (validation.NormalisePostcode),
// and its supplier and settlement.
type Point struct {
	MPAN              string
	AddressLines      [4]string
	Town              string
	Postcode          string
	SupplierMPID      string
	SupplierName      string
	HalfHourlySettled bool
}

// The bounds of the register's answers.
const (
	// MaxSearchResults is the most meter points a search answers (docs/api.md, "Meters: finding a
	// household's meter").
	MaxSearchResults = 50
	// MaxAtPostcode bounds the rows one postcode's lookup reads: Royal Mail's largest
	// residential postcodes hold a few hundred delivery points, so a postcode with more is a
	// register fault, not a reason to read without bound.
	MaxAtPostcode = 1000
	// MaxAddressBytes bounds an address a caller sends (by-address): the longest real UK
	// address is well under 300 bytes.
	MaxAddressBytes = 500
	// MaxBuildingBytes bounds a building identifier ("10A", "Flat 4", "The Old Barn").
	MaxBuildingBytes = 100
	// MaxFieldBytes bounds every text field of a register row.
	MaxFieldBytes = 200
)

// Address is the point's address in one line, as a search answers it: the non-empty address
// lines, the town and the postcode, joined by ", ".
func (p Point) Address() string {
	parts := make([]string, 0, 6)
	for _, l := range p.AddressLines {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	if t := strings.TrimSpace(p.Town); t != "" {
		parts = append(parts, t)
	}
	parts = append(parts, p.Postcode)
	return strings.Join(parts, ", ")
}

// Market is a market a meter point may trade in (prod's EligibleMarket).
type Market string

// The markets of prod's EligibleMarket enum.
const (
	MarketDNO       Market = "dno"
	MarketWholesale Market = "wholesale"
	MarketCM        Market = "cm"
)

// EligibleMarkets are the markets a meter point may trade in: a DNO's flexibility market
// always; the wholesale market and the capacity market only when it is settled half-hourly,
// because both are settled on its half-hourly consumption.
func (p Point) EligibleMarkets() []Market {
	if p.HalfHourlySettled {
		return []Market{MarketDNO, MarketWholesale, MarketCM}
	}
	return []Market{MarketDNO}
}

// SortKey orders addresses naturally ("2 High Street" before "10 High Street", "Flat 9"
// before "Flat 10"): the address lower-cased, with every run of digits left-padded with zeros
// to 10 digits. The register stores it with each row (collation "C"), so a postcode's meter
// points come back in order from its index.
func SortKey(address string) string {
	const width = 10
	var b strings.Builder
	b.Grow(len(address) + 16)
	for i := 0; i < len(address); {
		if c := address[i]; c >= '0' && c <= '9' {
			j := i
			for j < len(address) && address[j] >= '0' && address[j] <= '9' {
				j++
			}
			run := strings.TrimLeft(address[i:j], "0")
			if len(run) < width {
				b.WriteString(strings.Repeat("0", width-len(run)))
			}
			b.WriteString(run)
			i = j
			continue
		}
		r, size := utf8.DecodeRuneInString(address[i:])
		b.WriteRune(unicode.ToLower(r))
		i += size
	}
	return b.String()
}

// normaliseWords lower-cases s, drops punctuation but for letters, digits and spaces, and
// collapses whitespace: "Flat 4," and "flat  4" are the same words.
func normaliseWords(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteRune(unicode.ToLower(r))
		default:
			space = true
		}
	}
	return b.String()
}

// MatchesBuilding tells whether a household's building identifier (a number such as "3" or
// "10A", or a name such as "Flat 4" or "The Old Barn") names this meter point's building: an
// address line begins with it, case and punctuation aside, and a leading "The" on either
// side aside ("Old Barn" names "The Old Barn"); a number names its lettered houses but no
// longer number ("10" names "10A High Street"; "1" does not name "10 High Street", nor
// "Flat 4" "Flat 40"); or, for a name of four letters or more, an address line begins with a
// close spelling of it (one edit in up to eight characters, two beyond: "Rose Cotage" names
// "Rose Cottage"). An empty identifier names every building; one of punctuation alone ("%",
// "_", "'") names none, since it is not a wildcard.
func (p Point) MatchesBuilding(identifier string) bool {
	if strings.TrimSpace(identifier) == "" {
		return true
	}
	id := withoutThe(normaliseWords(identifier))
	if id == "" {
		return false
	}
	named := hasLetters(id) && utf8.RuneCountInString(id) >= 4
	for _, l := range p.AddressLines {
		line := withoutThe(normaliseWords(l))
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, id); ok {
			if !endsWithDigit(id) || rest == "" || rest[0] < '0' || rest[0] > '9' {
				return true
			}
		}
		if named && closeSpelling(id, line) {
			return true
		}
	}
	return false
}

// closeSpelling tells whether line begins with a word sequence within a few edits of id: the
// line's first words of id's length, give or take its allowance, with the same numbers (a
// number misspelt is another building: "Flat 4" is not "Flat 40").
func closeSpelling(id, line string) bool {
	numbers := numbersOf(id)
	allowed := 1
	if utf8.RuneCountInString(id) > 8 {
		allowed = 2
	}
	lineRunes, n := []rune(line), utf8.RuneCountInString(id)
	for length := n - allowed; length <= n+allowed; length++ {
		if length < 1 || length > len(lineRunes) {
			continue
		}
		// Only a prefix that ends at a word's end: "rose cott" is not a building.
		if length < len(lineRunes) && lineRunes[length] != ' ' {
			continue
		}
		prefix := string(lineRunes[:length])
		if slices.Equal(numbersOf(prefix), numbers) && levenshtein.ComputeDistance(id, prefix) <= allowed {
			return true
		}
	}
	return false
}

// withoutThe is normalised words without a leading "the": households drop it, or add it.
func withoutThe(words string) string {
	if rest, ok := strings.CutPrefix(words, "the "); ok {
		return rest
	}
	return words
}

// numbersOf is the runs of digits in s.
func numbersOf(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r < '0' || r > '9' })
}

func hasLetters(s string) bool {
	return strings.IndexFunc(s, unicode.IsLetter) >= 0
}

func endsWithDigit(s string) bool { return s != "" && s[len(s)-1] >= '0' && s[len(s)-1] <= '9' }

// Candidate is a meter point at a postcode with the trigram similarity (pg_trgm's
// similarity, 0..1) of its address to the address a caller gave, both read as the words
// that tell the postcode's addresses apart (TellingWords).
type Candidate struct {
	Point      Point
	Similarity float64
}

// The by-address rule's thresholds (docs/api.md, "Meters: finding a household's meter").
const (
	// MinSimilarity is the least similarity the best candidate must have.
	MinSimilarity = 0.6
	// MinLead is how far the best candidate must beat the second.
	MinLead = 0.1
)

// ErrNoUniqueMeter is an address that names no single meter point (none close enough, or two
// too close to tell apart); Candidates says how many the postcode held.
type ErrNoUniqueMeter struct{ Candidates int }

func (e *ErrNoUniqueMeter) Error() string {
	return "no single meter point matches the address"
}

// Pick is the meter point an address names among its postcode's candidates, ranked best
// first: the best when its similarity is at least MinSimilarity and it beats the second by at
// least MinLead; otherwise an *ErrNoUniqueMeter.
func Pick(ranked []Candidate) (Point, error) {
	if len(ranked) == 0 || ranked[0].Similarity < MinSimilarity ||
		(len(ranked) > 1 && ranked[0].Similarity-ranked[1].Similarity < MinLead) {
		return Point{}, &ErrNoUniqueMeter{Candidates: len(ranked)}
	}
	return ranked[0].Point, nil
}

// ErrNoPostcode is an address with no UK postcode in it.
var ErrNoPostcode = errors.New("the address contains no UK postcode")

// PostcodeIn finds the UK postcode an address contains, normalised: the last pair of words
// that is one ("221B Baker Street, London, NW1 6XE"), or the last word that is one written
// without its space ("... NW16XE").
func PostcodeIn(address string) (string, error) {
	words := strings.FieldsFunc(address, func(r rune) bool { return unicode.IsSpace(r) || r == ',' })
	for i := len(words) - 1; i >= 0; i-- {
		if i > 0 {
			if pc, err := validation.NormalisePostcode(words[i-1] + " " + words[i]); err == nil {
				return pc, nil
			}
		}
		if pc, err := validation.NormalisePostcode(words[i]); err == nil {
			return pc, nil
		}
	}
	return "", ErrNoPostcode
}

// Register is where meter points are looked up: the PostgreSQL register Flexsite ships
// (internal/meterstore), or an upstream meter service a deployment puts in its place.
// Every method answers db.ErrNotFound-free results: none found is an empty answer, except
// ByMPAN's ok.
type Register interface {
	// AtPostcode is the meter points at a normalised postcode, in natural address order
	// (SortKey), at most limit of them.
	AtPostcode(ctx context.Context, postcode string, limit int) ([]Point, error)
	// ByMPAN is the meter point of an MPAN; ok is false when the register has none.
	ByMPAN(ctx context.Context, mpan string) (p Point, ok bool, err error)
	// Ranked is the meter points at a normalised postcode ranked by the similarity of their
	// address to address (TellingWords of both), best first (ties in natural address
	// order), at most limit.
	Ranked(ctx context.Context, postcode, address string, limit int) ([]Candidate, error)
	// Loaded tells whether the register holds any meter point: an empty one (none imported
	// yet) cannot tell a meter point that does not exist from one it was never given.
	Loaded(ctx context.Context) (bool, error)
}

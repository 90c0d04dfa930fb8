// Package synth generates a synthetic meter-point register, deterministic by seed, for the tests,
// the bench and `make run` (docs/platform.md, "The meter register"): MPANs with valid check digits
// and never repeated, postcodes of real UK shapes grouped as real ones are (a few to a few dozen
// meter points each), and addresses of the kinds a register holds (numbered houses, houses with a
// letter, flats in a named block, named houses). None of it is a real address or meter.
package synth

import (
	"encoding/csv"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"

	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/validation"
)

const london = "London"

// areas are real postcode areas with a town of each.
var areas = []struct{ area, town string }{
	{"SW", london}, {"SE", london}, {"N", london}, {"E", london}, {"M", "Manchester"},
	{"B", "Birmingham"}, {"LS", "Leeds"}, {"G", "Glasgow"}, {"EH", "Edinburgh"}, {"CF", "Cardiff"},
	{"BS", "Bristol"}, {"NE", "Newcastle upon Tyne"}, {"L", "Liverpool"}, {"S", "Sheffield"},
	{"NG", "Nottingham"}, {"LE", "Leicester"}, {"CV", "Coventry"}, {"OX", "Oxford"},
	{"CB", "Cambridge"}, {"BN", "Brighton"}, {"PO", "Portsmouth"}, {"SO", "Southampton"},
	{"EX", "Exeter"}, {"PL", "Plymouth"}, {"YO", "York"}, {"HU", "Hull"}, {"DE", "Derby"},
	{"NR", "Norwich"}, {"AB", "Aberdeen"}, {"DD", "Dundee"}, {"BT", "Belfast"}, {"SA", "Swansea"},
}

var streetNames = []string{"High", "Church", "Station", "Victoria", "Park", "Mill", "King", "Queen",
	"Green", "Manor", "Albert", "Chapel", "Springfield", "Grange", "Meadow", "Orchard", "Willow",
	"Elm", "Oak", "Ash", "Beech", "Cedar", "York", "Windsor", "Bridge", "School", "Castle", "North",
	"South", "West", "Mount", "Hill", "Lime", "Holly", "Rose", "Cherry", "Thornton", "Kingsway"}

var streetKinds = []string{"Street", "Road", "Lane", "Avenue", "Close", "Drive", "Way", "Gardens",
	"Crescent", "Terrace", "Place", "Grove"}

var houseNames = []string{"The Old Barn", "Rose Cottage", "The Coach House", "Ivy Cottage",
	"The Old Rectory", "Orchard House", "Meadow View", "The Lodge", "Willow Cottage", "The Stables",
	"Holly Lodge", "Fern Cottage", "The Old School House", "Hillside", "Woodlands", "The Granary"}

var blockNames = []string{"Rose Court", "Victoria House", "Albion Court", "Park View", "Riverside House",
	"Kingfisher Court", "Mill House", "Tower Court", "Regent House", "Cedar Court"}

var suppliers = []struct{ mpid, name string }{
	{"BGAS", "British Gas"}, {"OCTO", "Octopus Energy"}, {"EDFE", "EDF Energy"}, {"EONN", "E.ON Next"},
	{"OVOE", "OVO Energy"}, {"SPOW", "ScottishPower"}, {"UTIL", "Utility Warehouse"}, {"SOEN", "So Energy"},
}

// unitLetters are the letters a postcode's unit may use (never C, I, K, M, O or V).
const unitLetters = "ABDEFGHJLNPQRSTUWXYZ"

// mpanSpace is the 10 digits of an MPAN core after its distributor id; mpanStride, coprime
// with it, walks every value once, so n meter points never share an MPAN.
const (
	mpanSpace  = 10_000_000_000
	mpanStride = 7_919_001_239
)

// Generate calls yield with n meter points, the same ones for the same seed. The first meter
// points lie at the anchor postcodes (normalised; a dozen or so each, so that a walk-through
// can find meters at known postcodes), the rest at generated ones.
func Generate(seed uint64, n int, anchors []string, yield func(meters.Point) error) error {
	g := generator{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), seed: seed, used: map[string]bool{}}
	for _, a := range anchors {
		pc, err := validation.NormalisePostcode(a)
		if err != nil {
			return fmt.Errorf("anchor postcode %q: %w", a, err)
		}
		g.used[pc] = true
	}
	for i := 0; i < n; {
		var postcode, town string
		if a := g.postcodes; a < len(anchors) {
			postcode, _ = validation.NormalisePostcode(anchors[a])
			town = townOf(postcode)
		} else {
			postcode, town = g.postcode()
		}
		g.postcodes++
		for _, p := range g.street(postcode, town, min(g.perPostcode(), n-i)) {
			if err := yield(p); err != nil {
				return err
			}
			i++
		}
	}
	return nil
}

// WriteCSV writes n generated meter points as a register file: a header row, then a row each.
func WriteCSV(w io.Writer, seed uint64, n int, anchors []string) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(meters.Columns); err != nil {
		return err
	}
	err := Generate(seed, n, anchors, func(p meters.Point) error { return cw.Write(p.Record()) })
	if err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

type generator struct {
	rng       *rand.Rand
	seed      uint64
	postcodes int
	mpans     uint64
	// used are the postcodes given a street already: a postcode drawn twice would hold two
	// streets, and could hold one address twice.
	used map[string]bool
}

// townOf is the town of an anchor postcode's area (London when its area is not one of
// areas').
func townOf(postcode string) string {
	area := postcode[:strings.IndexFunc(postcode, func(r rune) bool { return r < 'A' || r > 'Z' })]
	for _, a := range areas {
		if a.area == area {
			return a.town
		}
	}
	return london
}

func (g *generator) perPostcode() int { return 4 + g.rng.IntN(30) }

// postcode is a fresh postcode of a real shape (A9 9AA, A99 9AA, AA9 9AA, AA99 9AA, A9A 9AA,
// AA9A 9AA) in one of the areas, and its town.
func (g *generator) postcode() (string, string) {
	a := areas[g.rng.IntN(len(areas))]
	district := fmt.Sprint(1 + g.rng.IntN(29))
	if len(a.area) == 2 && a.town == london && g.rng.IntN(4) == 0 && len(district) == 1 {
		district += string("ABCDEFGHJKPSTUW"[g.rng.IntN(15)]) // SW1A, SE1P...
	}
	unit := string(unitLetters[g.rng.IntN(len(unitLetters))]) + string(unitLetters[g.rng.IntN(len(unitLetters))])
	sector := g.rng.IntN(10)
	pc := fmt.Sprintf("%s%s %d%s", a.area, district, sector, unit)
	if _, err := validation.NormalisePostcode(pc); err != nil {
		return g.postcode() // a district a shape does not allow (rare): draw again
	}
	// A postcode drawn before takes the next unused unit of its sector instead: walking
	// without drawing keeps every later draw, so only the colliding postcodes change.
	units := len(unitLetters) * len(unitLetters)
	for u, tried := strings.Index(unitLetters, unit[:1])*len(unitLetters)+strings.Index(unitLetters, unit[1:]), 0; g.used[pc]; tried++ {
		if tried == units {
			return g.postcode() // every unit of the sector is taken: draw again
		}
		u = (u + 1) % units
		unit = string(unitLetters[u/len(unitLetters)]) + string(unitLetters[u%len(unitLetters)])
		pc = fmt.Sprintf("%s%s %d%s", a.area, district, sector, unit)
	}
	g.used[pc] = true
	return pc, a.town
}

// street is count meter points of one postcode: one street, and a mix of numbered houses,
// houses with a letter, flats of a block and named houses.
func (g *generator) street(postcode, town string, count int) []meters.Point {
	street := streetNames[g.rng.IntN(len(streetNames))] + " " + streetKinds[g.rng.IntN(len(streetKinds))]
	out := make([]meters.Point, 0, count)
	number := 1 + g.rng.IntN(40)
	// A postcode never holds two buildings of one name: each name and block is drawn once,
	// and a number's letters are never repeated.
	names, blocks := g.rng.Perm(len(houseNames)), g.rng.Perm(len(blockNames))
	lettered := map[string]bool{}
	for len(out) < count {
		var lines [4]string
		switch k := g.rng.IntN(20); {
		case k < 12: // a numbered house
			lines[0] = fmt.Sprintf("%d %s", number, street)
			number += 1 + g.rng.IntN(2)
		case k < 14: // a house with a letter, beside its number
			letter := 'A' + rune(g.rng.IntN(3))
			for lettered[fmt.Sprintf("%d%c", number, letter)] {
				letter++ // the next letter: the drawn one is taken
			}
			lettered[fmt.Sprintf("%d%c", number, letter)] = true
			lines[0] = fmt.Sprintf("%d%c %s", number, letter, street)
		case k < 17 && len(blocks) > 0: // the flats of a block
			block := blockNames[blocks[0]]
			blocks = blocks[1:]
			for f := 1; f <= 2+g.rng.IntN(8) && len(out) < count; f++ {
				out = append(out, g.point([4]string{fmt.Sprintf("Flat %d", f), block,
					fmt.Sprintf("%d %s", number, street)}, town, postcode))
			}
			number += 2
			continue
		case len(names) > 0: // a named house
			lines[0], lines[1] = houseNames[names[0]], street
			names = names[1:]
		default:
			continue
		}
		out = append(out, g.point(lines, town, postcode))
	}
	return out
}

func (g *generator) point(lines [4]string, town, postcode string) meters.Point {
	s := suppliers[g.rng.IntN(len(suppliers))]
	return meters.Point{MPAN: g.mpan(), AddressLines: lines, Town: town, Postcode: postcode,
		SupplierMPID: s.mpid, SupplierName: s.name, HalfHourlySettled: g.rng.IntN(10) < 3}
}

// mpan is the next MPAN core: a distributor id (10 to 23), ten digits that walk mpanSpace
// without repeating (from a start the seed picks), and the check digit.
func (g *generator) mpan() string {
	g.mpans++
	body := (g.seed%mpanSpace + g.mpans*mpanStride) % mpanSpace
	first12 := fmt.Sprintf("%02d%010d", 10+body%14, body)
	return first12 + fmt.Sprint(validation.MPANCheckDigit(first12))
}

package hostedflow

import (
	"math"
	"strconv"

	"github.com/flexsite/flexsite/internal/meters"
)

func pow(x, y float64) float64 { return math.Pow(x, y) }

// Steps of the flow, in order (the `step` of its events).
var Steps = []string{"address", "consent", "assets", StepConnect, "eligibility", "enrol", "rewards"}

// StepConnect is the Connect step: the makers' accounts the household's devices need.
const StepConnect = "connect"

// Progress is what a household has stored so far.
type Progress struct {
	HasAddress, HasConsent bool
	Assets, Enrolments     int
	// Lapsed: a device connection of the household needs it to authorise again.
	Lapsed bool
	// Unconnected: a provider of the household's devices has no connection yet.
	Unconnected bool
}

// StartStep is where a household (new or returning) starts: the first step it has not done,
// or its rewards once it is enrolled. A household whose device connection lapsed starts at
// the Connect step ("Reconnect your ... account to keep earning rewards").
func StartStep(p Progress) string {
	switch {
	case p.Lapsed && p.HasAddress && p.HasConsent && p.Assets > 0:
		return StepConnect
	case !p.HasAddress:
		return "address"
	case !p.HasConsent:
		return "consent"
	case p.Assets == 0:
		return "assets"
	case p.Enrolments == 0 && p.Unconnected:
		return StepConnect
	case p.Enrolments == 0:
		return "eligibility"
	default:
		return "rewards"
	}
}

// Explain says in plain words why an asset does not qualify, for an eligibility issue code
// (the codes of the API's eligibility record). An unknown code gets a general sentence,
// never the code itself.
func Explain(code string) string {
	switch code {
	case "asset_model_not_set":
		return "We need to know the model of this device. Choose it from the list."
	case "asset_model_not_found":
		return "We don't know this model yet, so we can't check it."
	case "asset_model_not_cop11_qualified":
		return "This model does not meet the smart-charging security standard the programme needs."
	case "asset_installation_date_not_set":
		return "We need to know when this device was installed."
	case "asset_model_enrol_eligibility_override":
		return "This model can't join the programme at the moment."
	case "non_domestic_site":
		return "The programme is only open to homes, and this address is registered as a business."
	case "asset_type_not_supported":
		return "This kind of device can't take part in this programme."
	case "site_details_missing":
		return "We need your address and meter number before we can check."
	default:
		return "This device does not qualify for this programme yet."
	}
}

// PropositionName is the name a household reads for a proposition.
func PropositionName(p string) string {
	switch p {
	case "limited_pause":
		return "Occasional pauses"
	case "full_asset_schedule_control":
		return "Smart scheduling"
	case "price_curve":
		return "Price-led charging"
	default:
		return p
	}
}

// PropositionDescription is one sentence on what joining a proposition means.
func PropositionDescription(p string) string {
	switch p {
	case "limited_pause":
		return "now and then, at busy times, your devices pause for a short while."
	case "full_asset_schedule_control":
		return "your devices run when electricity is cleanest and cheapest, within the limits you set."
	case "price_curve":
		return "your devices follow the price of electricity through the day."
	default:
		return "a flexibility programme."
	}
}

// AssetTypeName is the name a household reads for an asset type.
func AssetTypeName(t string) string {
	switch t {
	case "charger":
		return "EV charger"
	case "battery":
		return "Home battery"
	case "heat pump":
		return "Heat pump"
	case "electric_vehicle":
		return "Electric vehicle"
	case "hot water tank":
		return "Hot water tank"
	default:
		return "Device"
	}
}

// RefusalWords says in plain words why joining a programme was refused, for the refusal codes
// of the enrol endpoint.
func RefusalWords(code string) string {
	switch code {
	case "prerequisites_not_met":
		return "Your home can't join this programme yet: none of your devices qualifies. See what you can join."
	case "proposition_not_offered":
		return "This programme isn't open at the moment."
	case "consent_required":
		return "Please agree to meter readings first (the Consent step)."
	case "previously_withdrew":
		return "You left this programme before. Tick it again to rejoin."
	default:
		return "Your home can't join this programme at the moment."
	}
}

// The words of "Find my meter" (the address step's search of the meter-point register).
const (
	// MeterPostcodeWords answers a search whose postcode is not a UK postcode.
	MeterPostcodeWords = "Enter a UK postcode, like SW1A 1AA."
	// MeterRefWords answers a picked address whose reference does not open (altered, of
	// another household's organisation, or older than an hour): the household searches again.
	MeterRefWords = "This address could not be used; search again."
	// MeterUnavailableWords answers a search while the register cannot be read.
	MeterUnavailableWords = "We can't look up addresses just now. Try again in a minute, or enter your MPAN."
	// MeterBudgetWords answers a search past the household's (or its organisation's) budget
	// of lookups (429, with Retry-After when it frees).
	MeterBudgetWords = "You've searched for addresses many times this hour. Try again later, or enter your MPAN."
	// MeterElsewhereWords answers a picked address that is not at the postcode saved with it
	// (the household changed the postcode after searching, or sent another search's reference).
	MeterElsewhereWords = "This address is not at the postcode you entered; search that postcode again."
	// MeterChangesWords answers an address step past the household's budget of meter changes
	// (household.MeterChangesCode).
	MeterChangesWords = "Your meter has been changed too many times today. Try again tomorrow."
)

// MeterBuildingWords answers a house number or name that is not one line of at most
// meters.MaxBuildingBytes bytes.
var MeterBuildingWords = "Enter a house number or name of at most " + strconv.Itoa(meters.MaxBuildingBytes) +
	" characters, on one line."

// MetersFound says what a search found at a postcode: how many addresses, or, when none, what
// to do instead. full: the list stops at its bound, so the household is told to narrow it.
func MetersFound(n int, postcode string, full bool) string {
	switch {
	case n == 0:
		return "No addresses found at " + postcode + ": check the postcode or enter your MPAN."
	case full:
		return "The first " + strconv.Itoa(n) + " addresses at " + postcode + ": add your house number or name to find yours."
	case n == 1:
		return "1 address found at " + postcode + "."
	default:
		return strconv.Itoa(n) + " addresses found at " + postcode + "."
	}
}

package hostedflow

import (
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func TestColour(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"#1D4F91", "#1d4f91", true},
		{"#abc", "#aabbcc", true},
		{"#fff", "#ffffff", true},
		{"", "", false},
		{"red", "", false},
		{"#abcd", "", false},
		{"#1d4f91;}body{display:none", "", false},
		{"1d4f91", "", false},
		{"#ggg", "", false},
		{"rgb(0,0,0)", "", false},
		{"#1d4f91\n", "", false},
	} {
		got, ok := Colour(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Colour(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestThemeFromIgnoresAnythingButColours(t *testing.T) {
	if got := ThemeFrom("</style><script>", "url(x)"); got != DefaultTheme {
		t.Errorf("ThemeFrom(junk) = %+v, want the default", got)
	}
	if got := ThemeFrom("#005a30", "#FFFFF0"); got != (Theme{Primary: "#005a30", Background: "#fffff0"}) {
		t.Errorf("ThemeFrom = %+v", got)
	}
}

// The default theme meets WCAG 2.2 AA (4.5:1 for text) for every pair the styles use.
func TestDefaultThemeContrast(t *testing.T) {
	th := DefaultTheme
	pairs := map[string][2]string{
		"button text on primary":    {OnColour(th.Primary), th.Primary},
		"text on background":        {OnColour(th.Background), th.Background},
		"muted text on background":  {muted(th.Background), th.Background},
		"primary focus ring on bg":  {th.Primary, th.Background},
		"error text on white":       {"#b00020", "#ffffff"},
		"input text on input white": {"#1a1a1a", "#ffffff"},
	}
	for name, p := range pairs {
		if c := Contrast(p[0], p[1]); c < 4.5 {
			t.Errorf("%s: %s on %s is %.2f:1, below 4.5:1", name, p[0], p[1], c)
		}
	}
}

func TestContrast(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want float64
	}{
		{"#000000", "#ffffff", 21},
		{"#ffffff", "#ffffff", 1},
		{"#777777", "#ffffff", 4.48},
	} {
		if got := Contrast(tc.a, tc.b); got < tc.want-0.01 || got > tc.want+0.01 {
			t.Errorf("Contrast(%s, %s) = %.3f, want %.2f", tc.a, tc.b, got, tc.want)
		}
	}
	// A theme's text colour is whichever of dark and white reads better.
	for _, bg := range []string{"#000000", "#1d4f91", "#ffff00", "#ffffff", "#777777"} {
		on := OnColour(bg)
		other := "#ffffff"
		if on == other {
			other = "#1a1a1a"
		}
		if Contrast(on, bg) < Contrast(other, bg) {
			t.Errorf("OnColour(%s) = %s, but %s contrasts more", bg, on, other)
		}
	}
}

func TestRenderAllowsOnlyItsOwnInlineStyle(t *testing.T) {
	p, err := Render(ThemeFrom("#005a30", ""))
	if err != nil {
		t.Fatal(err)
	}
	html := string(p.HTML)
	style := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindAllStringSubmatch(html, -1)
	if len(style) != 1 {
		t.Fatalf("want exactly one inline style, got %d", len(style))
	}
	sum := sha256.Sum256([]byte(style[0][1]))
	hash := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
	if !strings.Contains(p.CSP, "style-src 'self' "+hash+";") {
		t.Errorf("CSP %q does not allow the inline style by its hash %s", p.CSP, hash)
	}
	if !strings.Contains(style[0][1], "--primary:#005a30") {
		t.Errorf("theme not applied: %s", style[0][1])
	}
	for _, directive := range []string{"default-src 'none'", "script-src 'self';", "connect-src 'self'", "form-action 'none'",
		"base-uri 'none'", "frame-ancestors *"} {
		if !strings.Contains(p.CSP, directive) {
			t.Errorf("CSP %q lacks %q", p.CSP, directive)
		}
	}
	if strings.Contains(p.CSP, "unsafe-inline") || strings.Contains(p.CSP, "unsafe-eval") {
		t.Errorf("CSP %q allows inline code", p.CSP)
	}
	if regexp.MustCompile(`<script>|\son[a-z]+=|style="`).MatchString(html) {
		t.Error("the page has inline script, an inline handler or a style attribute")
	}
	if regexp.MustCompile(`(?i)(src|href)="https?://`).MatchString(html) {
		t.Error("the page loads something from another origin")
	}
}

// Every input of the page has a visible label and the API field's name (docs/hosted-flow.md, "Form
// conventions").
func TestFormConventions(t *testing.T) {
	html := string(mustRead("static/flow.html"))
	for _, name := range []string{"postcode", "street_address", "mpan", "gave_boundary_meter_consent", "type", "asset_model",
		"installation_date", "power_kw"} {
		if !regexp.MustCompile(`id="` + name + `"[^>]*name="` + name + `"|name="` + name + `"[^>]*id="` + name + `"`).MatchString(html) {
			t.Errorf("no input with id and name %q", name)
		}
		if !strings.Contains(html, `<label for="`+name+`"`) {
			t.Errorf("no label for %q", name)
		}
		if !strings.Contains(html, `id="`+name+`-error"`) || !strings.Contains(html, name+`-error"`) {
			t.Errorf("no error element tied to %q", name)
		}
	}
	if n := strings.Count(html, "<form "); n != strings.Count(html, `<button type="submit">`) {
		t.Errorf("%d forms but %d submit buttons", n, strings.Count(html, `<button type="submit">`))
	}
	if !strings.Contains(string(mustRead("static/flow.js")), `name: "proposition"`) {
		t.Error("the enrol choice is not named proposition")
	}
}

func TestExplain(t *testing.T) {
	codes := []string{
		string(flexv1.IssueAssetModelNotSet), string(flexv1.IssueAssetModelNotFound), string(flexv1.IssueAssetModelNotCoP11Qualified),
		string(flexv1.IssueInstallationDateNotSet), string(flexv1.IssueAssetModelEnrolEligibilityOverride),
		string(flexv1.IssueNonDomesticSite), string(flexv1.IssueAssetTypeNotSupported), string(flexv1.IssueSiteDetailsMissing),
	}
	seen := map[string]string{}
	for _, code := range codes {
		s := Explain(code)
		if s == Explain("no_such_code") {
			t.Errorf("Explain(%q) falls back to the general sentence", code)
		}
		if prev, dup := seen[s]; dup {
			t.Errorf("Explain(%q) = Explain(%q) = %q", code, prev, s)
		}
		seen[s] = code
		if strings.Contains(s, "_") || !strings.HasSuffix(s, ".") || strings.ToUpper(s[:1]) != s[:1] {
			t.Errorf("Explain(%q) = %q: not a plain sentence", code, s)
		}
	}
	if s := Explain("something_new"); strings.Contains(s, "something_new") {
		t.Errorf("an unknown code is shown as itself: %q", s)
	}
	for _, p := range flexv1.AllPropositions {
		if name := PropositionName(string(p)); strings.Contains(name, "_") {
			t.Errorf("PropositionName(%s) = %q", p, name)
		}
		if PropositionDescription(string(p)) == PropositionDescription("x") {
			t.Errorf("no description for %s", p)
		}
	}
	for _, ty := range flexv1.CreatableAssetTypes {
		if AssetTypeName(string(ty)) == "Device" {
			t.Errorf("no name for asset type %s", ty)
		}
	}
}

func TestStartStep(t *testing.T) {
	for _, tc := range []struct {
		p    Progress
		want string
	}{
		{Progress{}, "address"},
		{Progress{HasConsent: true, Assets: 2, Enrolments: 1}, "address"},
		{Progress{HasAddress: true}, "consent"},
		{Progress{HasAddress: true, HasConsent: true}, "assets"},
		{Progress{HasAddress: true, HasConsent: true, Assets: 1}, "eligibility"},
		{Progress{HasAddress: true, HasConsent: true, Assets: 1, Enrolments: 1}, "rewards"},
		{Progress{HasAddress: true, HasConsent: true, Assets: 1, Unconnected: true}, "connect"},
		{Progress{HasAddress: true, HasConsent: true, Assets: 1, Enrolments: 1, Unconnected: true}, "rewards"},
		{Progress{HasAddress: true, HasConsent: true, Assets: 1, Enrolments: 1, Lapsed: true}, "connect"},
		{Progress{HasAddress: true, Assets: 1, Enrolments: 1, Lapsed: true}, "consent"},
	} {
		if got := StartStep(tc.p); got != tc.want {
			t.Errorf("StartStep(%+v) = %s, want %s", tc.p, got, tc.want)
		}
	}
}

func TestRefusalWords(t *testing.T) {
	seen := map[string]bool{}
	for _, code := range []string{"prerequisites_not_met", "proposition_not_offered", "consent_required", "previously_withdrew", "other"} {
		w := RefusalWords(code)
		if seen[w] || strings.Contains(w, "_") || !strings.HasSuffix(w, ".") {
			t.Errorf("RefusalWords(%q) = %q", code, w)
		}
		seen[w] = true
	}
}

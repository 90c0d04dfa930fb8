// Package hostedflow holds what the embeddable hosted flow (GET /hosted/flow, docs/hosted-flow.md,
// "Embedding the hosted flow") is made of apart from the HTTP door: its page, script and styles
// (embedded in the binary: no CDN, no third-party request), its Content-Security-Policy, the
// validation of its theming parameters, the plain words it shows for eligibility issue codes, and
// the step a returning household starts at. Everything here is pure; the REST API serves it and
// owns the JSON routes the script calls, which go through the same household core as the REST API.
package hostedflow

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"regexp"
	"strconv"
	"strings"
)

//go:embed static
var static embed.FS

// Asset is one embedded file the page loads (same origin, /hosted/<name>).
type Asset struct {
	ContentType string
	Body        []byte
}

// Assets are the script and styles of the page, by the name under /hosted/.
var Assets = map[string]Asset{
	"flow.js":  {"text/javascript; charset=utf-8", mustRead("static/flow.js")},
	"flow.css": {"text/css; charset=utf-8", mustRead("static/flow.css")},
}

var page = template.Must(template.New("flow.html").Parse(string(mustRead("static/flow.html"))))

func mustRead(name string) []byte {
	b, err := static.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return b
}

// Theme is the page's colours: the primary (buttons, links, focus) and the background.
type Theme struct{ Primary, Background string }

// DefaultTheme meets WCAG 2.2 AA: white on the primary is 7.0:1, the primary on the background
// 7.0:1, the text (#1a1a1a) on the background 17:1.
var DefaultTheme = Theme{Primary: "#1d4f91", Background: "#ffffff"}

// ThemeFrom reads the query parameters primary and background: each is used only when it is a
// valid colour (#rgb or #rrggbb); anything else is ignored and the default kept.
func ThemeFrom(primary, background string) Theme {
	t := DefaultTheme
	if c, ok := Colour(primary); ok {
		t.Primary = c
	}
	if c, ok := Colour(background); ok {
		t.Background = c
	}
	return t
}

var hexColour = regexp.MustCompile(`^#([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`)

// Colour validates a CSS colour given as #rgb or #rrggbb (what a query string can carry
// without escaping trouble) and answers it lower-cased as #rrggbb.
func Colour(v string) (string, bool) {
	if !hexColour.MatchString(v) {
		return "", false
	}
	v = strings.ToLower(v[1:])
	if len(v) == 3 {
		v = string([]byte{v[0], v[0], v[1], v[1], v[2], v[2]})
	}
	return "#" + v, true
}

// luminance is the WCAG relative luminance of a #rrggbb colour.
func luminance(hex string) float64 {
	var lin [3]float64
	for i := range 3 {
		n, _ := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		c := float64(n) / 255
		if c <= 0.04045 {
			lin[i] = c / 12.92
		} else {
			lin[i] = pow((c+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*lin[0] + 0.7152*lin[1] + 0.0722*lin[2]
}

// Contrast is the WCAG contrast ratio of two #rrggbb colours (1 to 21).
func Contrast(a, b string) float64 {
	la, lb := luminance(a), luminance(b)
	if la < lb {
		la, lb = lb, la
	}
	return (la + 0.05) / (lb + 0.05)
}

// OnColour is the text colour (near-black or white) that reads best on bg, so that a theme
// an organisation picks keeps its buttons and page text legible.
func OnColour(bg string) string {
	const dark, light = "#1a1a1a", "#ffffff"
	if Contrast(dark, bg) >= Contrast(light, bg) {
		return dark
	}
	return light
}

// Page is the rendered page and the Content-Security-Policy it is served with.
type Page struct {
	HTML []byte
	CSP  string
}

// Render builds the page for a theme. The theme is the only inline style; it is allowed by its
// hash, so the policy needs no 'unsafe-inline'.
func Render(t Theme) (Page, error) {
	css := fmt.Sprintf(":root{--primary:%s;--on-primary:%s;--background:%s;--text:%s;--muted:%s}",
		t.Primary, OnColour(t.Primary), t.Background, OnColour(t.Background), muted(t.Background))
	var buf bytes.Buffer
	if err := page.Execute(&buf, map[string]any{"ThemeCSS": template.CSS(css)}); err != nil {
		return Page{}, err
	}
	sum := sha256.Sum256([]byte(css))
	return Page{HTML: buf.Bytes(), CSP: CSP("'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'")}, nil
}

// muted is the secondary text colour: still 4.5:1 on the background.
func muted(bg string) string {
	if OnColour(bg) == "#ffffff" {
		return "#d0d0d0"
	}
	return "#4a4a4a"
}

// CSP is the page's policy. What it enforces before any token arrives, and after:
//   - scripts and styles only from the flow's own origin (styleHash admits the theme's one
//     inline block), nothing inline otherwise, no eval; no images, fonts, media, objects or
//     workers from anywhere but itself;
//   - connect-src 'self': the script can call the flow's own origin only, so the token it holds
//     can travel nowhere else;
//   - form-action 'none': a form can never be submitted natively (which could put its fields
//     in a URL); the script sends them as JSON;
//   - base-uri 'none'; and frame-ancestors *: the page is loaded before the token (and so its
//     allowed_origin) is known, so framing is not refused here. Instead everything the page
//     shows or does is bound to the verified token: the token is accepted only from a message
//     whose origin is the token's allowed_origin (checked by the server on every call), and
//     events go only to that origin.
//
// The JSON routes under /hosted/api answer with frame-ancestors 'none'.
func CSP(styleHash string) string {
	return "default-src 'none'; script-src 'self'; style-src 'self' " + styleHash +
		"; connect-src 'self'; img-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors *"
}

package hostedflow

import (
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
)

var styleBlock = regexp.MustCompile(`(?s)<style>(.*?)</style>`)

// FuzzTheme fuzzes the theming query parameters: whatever they are, the page keeps exactly
// one inline style, the policy's hash is that style's, and nothing of the input but a
// validated colour reaches the page.
func FuzzTheme(f *testing.F) {
	for _, seed := range [][2]string{{"#005a30", "#fff"}, {"red", ""}, {"#abc;}</style><script>alert(1)</script>", "#FFFFFF"},
		{"", "url(javascript:1)"}, {"#1d4f91\x00", "#\u00ff\u00ff\u00ff"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, primary, background string) {
		th := ThemeFrom(primary, background)
		for _, c := range []string{th.Primary, th.Background} {
			if !regexp.MustCompile(`^#[0-9a-f]{6}$`).MatchString(c) {
				t.Fatalf("theme colour %q", c)
			}
		}
		p, err := Render(th)
		if err != nil {
			t.Fatal(err)
		}
		styles := styleBlock.FindAllStringSubmatch(string(p.HTML), -1)
		if len(styles) != 1 {
			t.Fatalf("%d inline styles", len(styles))
		}
		sum := sha256.Sum256([]byte(styles[0][1]))
		if !strings.Contains(p.CSP, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") {
			t.Fatalf("the policy does not allow the style it is served with: %s", p.CSP)
		}
		if strings.ContainsAny(styles[0][1], "<>\"'\\") {
			t.Fatalf("markup in the style: %q", styles[0][1])
		}
	})
}

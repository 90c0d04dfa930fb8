package deviceauth

import (
	"errors"
	"testing"
	"time"
)

func TestTokenHandoverOpensOnlyWithItsKeyAndConnection(t *testing.T) {
	key, other := NewHandoverKey(), NewHandoverKey()
	tokens := Tokens{AccessToken: "a", RefreshToken: "r2", TokenType: "bearer",
		Expiry: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC), IssuedAt: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)}
	sealed, err := SealTokens(key, "uid-1", "r1", tokens)
	if err != nil {
		t.Fatal(err)
	}
	got, replaces, err := OpenTokens(key, "uid-1", sealed)
	if err != nil || got != tokens || replaces != "r1" {
		t.Fatalf("OpenTokens = %+v, %q, %v; want %+v, r1", got, replaces, err, tokens)
	}
	tampered := append([]byte(nil), sealed...)
	tampered[len(tampered)-1] ^= 1
	for name, c := range map[string]struct {
		key    []byte
		uid    string
		sealed []byte
	}{
		"another claim's key":  {other, "uid-1", sealed},
		"another connection":   {key, "uid-2", sealed},
		"altered":              {key, "uid-1", tampered},
		"truncated":            {key, "uid-1", sealed[:5]},
		"no key (none stored)": {nil, "uid-1", sealed},
	} {
		if _, _, err := OpenTokens(c.key, c.uid, c.sealed); !errors.Is(err, ErrHandoverSealed) {
			t.Errorf("%s: %v, want ErrHandoverSealed", name, err)
		}
	}
}

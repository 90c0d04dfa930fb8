package deviceauth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
)

// KeyHandoverKey holds, while a refresh claim is held, the key that seals the tokens the
// refresh obtains for their hand-over outside the Secret (the controller's PostgreSQL table
// device_token_handovers): written with the claim before the provider is called, deleted
// with it once the Secret holds the new tokens. Whoever reads the hand-over also needs this
// Secret to open it.
const KeyHandoverKey = "handover-key"

// NewHandoverKey is a fresh AES-256 key.
func NewHandoverKey() []byte {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return key
}

// ErrHandoverSealed is a hand-over that does not open with the key: sealed under another
// claim's key, for another connection, or altered.
var ErrHandoverSealed = errors.New("the token hand-over does not open with this key")

// handover is what is sealed: the tokens, and the refresh token they replace (they continue
// that grant only while the Secret still holds it: not once the household has authorised
// again).
type handover struct {
	Tokens   Tokens
	Replaces string
}

// SealTokens seals t, obtained with the refresh token replaces, with key for the connection
// uid (AES-256-GCM, the uid as associated data: a hand-over moved to another connection does
// not open).
func SealTokens(key []byte, uid, replaces string, t Tokens) ([]byte, error) {
	aead, err := handoverAEAD(key)
	if err != nil {
		return nil, err
	}
	plain, err := json.Marshal(handover{Tokens: t, Replaces: replaces})
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return aead.Seal(nonce, nonce, plain, []byte(uid)), nil
}

// OpenTokens opens what SealTokens sealed with the same key and uid: the tokens and the
// refresh token they replace.
func OpenTokens(key []byte, uid string, sealed []byte) (t Tokens, replaces string, err error) {
	aead, err := handoverAEAD(key)
	if err != nil {
		return Tokens{}, "", err
	}
	if len(sealed) < aead.NonceSize() {
		return Tokens{}, "", ErrHandoverSealed
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(uid))
	if err != nil {
		return Tokens{}, "", ErrHandoverSealed
	}
	var h handover
	if err := json.Unmarshal(plain, &h); err != nil {
		return Tokens{}, "", ErrHandoverSealed
	}
	return h.Tokens, h.Replaces, nil
}

func handoverAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != 32 {
		return nil, ErrHandoverSealed
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

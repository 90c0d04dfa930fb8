package pagestore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/keyring"
	"github.com/flexsite/flexsite/internal/pagestore"
	"github.com/flexsite/flexsite/internal/sealing"
)

var testDB *dbtest.Database

func TestMain(m *testing.M) { dbtest.Main(m, &testDB, func(*dbtest.Database) {}) }

// keyData is a key Secret's data with the given keys, the last one active.
func keyData(t *testing.T, kids ...string) (map[string][]byte, string) {
	t.Helper()
	data := map[string][]byte{}
	for _, kid := range kids {
		_, key, err := sealing.NewKey()
		if err != nil {
			t.Fatal(err)
		}
		data[kid+keyring.KeySuffix] = key
	}
	data[keyring.ActiveEntry] = []byte(kids[len(kids)-1])
	return data, kids[len(kids)-1]
}

func newStore(t *testing.T, data map[string][]byte) *pagestore.Store {
	t.Helper()
	ring := sealing.NewKeyRing(nil, nil, "", "", "bank details")
	if err := ring.Load(data); err != nil {
		t.Fatal(err)
	}
	return &pagestore.Store{Pool: testDB.Pool, Keys: ring}
}

// randomKey is a link key of its own, so tests do not meet each other's rows.
func randomKey() string {
	sum := sha256.Sum256([]byte(uuid.NewString()))
	return hex.EncodeToString(sum[:])[:40]
}

func TestLinkIsWrittenOnlyAtTheVersionRead(t *testing.T) {
	ctx := context.Background()
	data, _ := keyData(t, "k1")
	s := newStore(t, data)
	key := randomKey()
	if err := s.CreateLink(ctx, key, []byte(`{"link_hash":"h"}`), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateLink(ctx, key, []byte(`{}`), time.Now().Add(time.Hour)); !errors.Is(err, pagestore.ErrExists) {
		t.Fatalf("a second link under the same key: %v, want ErrExists", err)
	}
	l, err := s.Link(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	next, err := s.UpdateLink(ctx, key, l.Version, []byte(`{"redeemed":true}`), time.Now().Add(time.Hour))
	if err != nil || next != l.Version+1 {
		t.Fatalf("first write at the version read: %d, %v", next, err)
	}
	// The second redemption read the same version: it loses, and changes nothing.
	if _, err := s.UpdateLink(ctx, key, l.Version, []byte(`{"redeemed":"again"}`), time.Now().Add(time.Hour)); !errors.Is(err, pagestore.ErrChanged) {
		t.Fatalf("second write at a stale version: %v, want ErrChanged", err)
	}
	got, err := s.Link(ctx, key)
	if err != nil || string(got.State) != `{"redeemed": true}` {
		t.Fatalf("stored %s, %v", got.State, err)
	}
	if _, err := s.Link(ctx, "ffffffffffffffffffffffffffffffffffffffff"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("an unknown key: %v, want db.ErrNotFound", err)
	}
	// The key column takes 40 hex digits only.
	if err := s.CreateLink(ctx, "not-a-key", []byte(`{}`), time.Now()); err == nil {
		t.Fatal("a malformed key was stored")
	}
}

func TestSweepDeletesOnlyDeadLinks(t *testing.T) {
	ctx := context.Background()
	data, _ := keyData(t, "k1")
	s := newStore(t, data)
	now := time.Now()
	dead, live := randomKey(), randomKey()
	if err := s.CreateLink(ctx, dead, []byte(`{}`), now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateLink(ctx, live, []byte(`{}`), now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SweepLinks(ctx, now); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Link(ctx, dead); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("the dead link: %v, want gone", err)
	}
	if _, err := s.Link(ctx, live); err != nil {
		t.Fatalf("the live link: %v, want kept", err)
	}
}

func TestBankDetailsAreSealedAndBoundToTheirSite(t *testing.T) {
	ctx := context.Background()
	data, kid := keyData(t, "k1")
	s := newStore(t, data)
	org, site, other := "org-"+uuid.NewString()[:8], uuid.NewString(), uuid.NewString()
	details := []byte(`{"account_number":"12345678","sort_code":"112233"}`)
	if got, err := s.BankDetails(ctx, org, site); err != nil || got != nil {
		t.Fatalf("before any: %s, %v", got, err)
	}
	if err := s.PutBankDetails(ctx, org, site, details); err != nil {
		t.Fatal(err)
	}
	got, err := s.BankDetails(ctx, org, site)
	if err != nil || string(got) != string(details) {
		t.Fatalf("read back %s, %v", got, err)
	}
	// What the database holds is neither the account number nor anything readable.
	var storedKid string
	var ciphertext []byte
	if err := testDB.Pool.QueryRow(ctx, `SELECT key_id, ciphertext FROM bank_details WHERE organisation = $1 AND site_id = $2`,
		org, site).Scan(&storedKid, &ciphertext); err != nil {
		t.Fatal(err)
	}
	if storedKid != kid || bytes.Contains(ciphertext, []byte("12345678")) {
		t.Fatalf("stored key id %q, ciphertext %q", storedKid, ciphertext)
	}
	// A row copied to another site does not open there (the site is associated data).
	if _, err := testDB.Pool.Exec(ctx, `INSERT INTO bank_details (organisation, site_id, key_id, nonce, ciphertext)
		SELECT organisation, $3, key_id, nonce, ciphertext FROM bank_details WHERE organisation = $1 AND site_id = $2`,
		org, site, other); err != nil {
		t.Fatal(err)
	}
	if got, err := s.BankDetails(ctx, org, other); err == nil {
		t.Fatalf("a row moved to another site opened: %s", got)
	}
	if err := s.ForgetSite(ctx, org, site); err != nil {
		t.Fatal(err)
	}
	if got, err := s.BankDetails(ctx, org, site); err != nil || got != nil {
		t.Fatalf("after ForgetSite: %s, %v", got, err)
	}
}

func TestBankDetailsKeysRotate(t *testing.T) {
	ctx := context.Background()
	old, _ := keyData(t, "old")
	s := newStore(t, old)
	org, site := "org-"+uuid.NewString()[:8], uuid.NewString()
	if err := s.PutBankDetails(ctx, org, site, []byte("first")); err != nil {
		t.Fatal(err)
	}
	// The operator adds a key and makes it active: old rows still open with theirs, new
	// writes use the new one.
	_, newKey, _ := sealing.NewKey()
	rotated := map[string][]byte{"old" + keyring.KeySuffix: old["old"+keyring.KeySuffix], "new" + keyring.KeySuffix: newKey,
		keyring.ActiveEntry: []byte("new")}
	if err := s.Keys.Load(rotated); err != nil {
		t.Fatal(err)
	}
	if got, err := s.BankDetails(ctx, org, site); err != nil || string(got) != "first" {
		t.Fatalf("an old row after the rotation: %s, %v", got, err)
	}
	other := uuid.NewString()
	if err := s.PutBankDetails(ctx, org, other, []byte("second")); err != nil {
		t.Fatal(err)
	}
	if kid := keyIDOf(t, org, other); kid != "new" {
		t.Fatalf("a new write sealed with %q, want the active key", kid)
	}
	// Resealing moves every row to the active key; then the old key can go.
	for {
		n, err := s.Reseal(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	if kid := keyIDOf(t, org, site); kid != "new" {
		t.Fatalf("after Reseal the old row is sealed with %q", kid)
	}
	if err := s.Keys.Load(map[string][]byte{"new" + keyring.KeySuffix: newKey, keyring.ActiveEntry: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.BankDetails(ctx, org, site); err != nil || string(got) != "first" {
		t.Fatalf("after the old key left: %s, %v", got, err)
	}
	// A row whose key left the Secret does not open (and says why).
	if _, err := testDB.Pool.Exec(ctx, `UPDATE bank_details SET key_id = 'gone' WHERE organisation = $1 AND site_id = $2`, org, site); err != nil {
		t.Fatal(err)
	}
	if _, err := s.BankDetails(ctx, org, site); !errors.Is(err, keyring.ErrUnknownKey) {
		t.Fatalf("a row of a removed key: %v, want ErrUnknownKey", err)
	}
}

func TestKeySecretIsChecked(t *testing.T) {
	_, key, _ := sealing.NewKey()
	for name, data := range map[string]map[string][]byte{
		"no active":         {"a.key": key},
		"active names none": {"a.key": key, "active": []byte("b")},
		"short key":         {"a.key": key[:16], "active": []byte("a")},
		"key without an id": {".key": key, "active": []byte("")},
	} {
		if _, _, err := sealing.ParseKeys(data); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, active, err := sealing.ParseKeys(map[string][]byte{"a.key": key, "active": []byte("a\n")}); err != nil || active != "a" {
		t.Errorf("a good Secret: %q, %v", active, err)
	}
}

func keyIDOf(t *testing.T, org, site string) string {
	t.Helper()
	var kid string
	if err := testDB.Pool.QueryRow(context.Background(), `SELECT key_id FROM bank_details WHERE organisation = $1 AND site_id = $2`,
		org, site).Scan(&kid); err != nil {
		t.Fatal(err)
	}
	return kid
}

func TestImportNeverOverwritesNewerDetails(t *testing.T) {
	ctx := context.Background()
	data, _ := keyData(t, "k1")
	s := newStore(t, data)
	org, site, fresh := "org-"+uuid.NewString()[:8], uuid.NewString(), uuid.NewString()
	if err := s.PutBankDetails(ctx, org, site, []byte("entered since")); err != nil {
		t.Fatal(err)
	}
	if stored, err := s.PutBankDetailsIfAbsent(ctx, org, site, []byte("older")); err != nil || stored {
		t.Fatalf("over newer details: stored %v, %v", stored, err)
	}
	if got, err := s.BankDetails(ctx, org, site); err != nil || string(got) != "entered since" {
		t.Fatalf("read %s, %v", got, err)
	}
	if stored, err := s.PutBankDetailsIfAbsent(ctx, org, fresh, []byte("older")); err != nil || !stored {
		t.Fatalf("where there were none: stored %v, %v", stored, err)
	}
	name := "import-" + uuid.NewString()
	if done, err := s.Imported(ctx, name); err != nil || done {
		t.Fatalf("before: %v, %v", done, err)
	}
	if err := s.MarkImported(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkImported(ctx, name); err != nil {
		t.Fatal(err)
	}
	if done, err := s.Imported(ctx, name); err != nil || !done {
		t.Fatalf("after: %v, %v", done, err)
	}
}

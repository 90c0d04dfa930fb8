package sealing

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/flexsite/flexsite/internal/keyring"
)

const (
	// ActivatedSuffix ends the entry "<key id>.activated": when the key became the active one
	// (RFC 3339), the clock of its rotation.
	ActivatedSuffix = ".activated"
	// RetiredSuffix ends the entry "<key id>.retired": when the key stopped being the active
	// one (RFC 3339), the clock of its removal.
	RetiredSuffix = ".retired"
	// DefaultCheckEvery is how often a rotating ring re-reads its Secret and checks whether a
	// rotation or a removal is due.
	DefaultCheckEvery = time.Minute
)

// Rotation is a key ring's automatic rotation (docs/operations.md): a fresh key becomes the
// active one every Every, and a retired key is kept Keep after it stopped being active, so
// that what it sealed opens until it expires, then it is removed from the Secret. Keep must
// cover the validity of what the keys seal plus the time a replica may go on sealing with a
// retired key before it reloads (CheckEvery, and a margin). Keys that seal stored data (the
// bank details) must not rotate so: their rows outlive any Keep.
type Rotation struct {
	Every, Keep time.Duration
	// CheckEvery is how often every replica re-reads the Secret, and checks the rotation
	// (zero: DefaultCheckEvery).
	CheckEvery time.Duration
}

// Rotated is the key Secret's data after the rotation due at now, and whether it changed: the
// active key's clock started if it had none; a fresh key made active once the active one is
// Every old (the old one retired now); a key that is not active retired now if it had no
// retirement time (a key an operator retired by hand); a key retired Keep ago removed, with
// its entries. data is not modified.
func (r Rotation) Rotated(data map[string][]byte, now time.Time) (map[string][]byte, bool, error) {
	if _, _, err := ParseKeys(data); err != nil {
		return nil, false, err
	}
	out := maps.Clone(data)
	changed := false
	stamp := func(name string) {
		out[name] = []byte(now.UTC().Format(time.RFC3339))
		changed = true
	}
	active := strings.TrimSpace(string(data[keyring.ActiveEntry]))
	activated, err := entryTime(data, active+ActivatedSuffix)
	if err != nil {
		return nil, false, err
	}
	if activated.IsZero() {
		stamp(active + ActivatedSuffix)
		activated = now
	}
	for name := range data {
		kid, ok := strings.CutSuffix(name, keyring.KeySuffix)
		if !ok || kid == active {
			continue
		}
		retired, err := entryTime(data, kid+RetiredSuffix)
		if err != nil {
			return nil, false, err
		}
		switch {
		case retired.IsZero():
			stamp(kid + RetiredSuffix)
		case !now.Before(retired.Add(r.Keep)):
			delete(out, kid+keyring.KeySuffix)
			delete(out, kid+RetiredSuffix)
			delete(out, kid+ActivatedSuffix)
			changed = true
		}
	}
	if r.Every > 0 && !now.Before(activated.Add(r.Every)) {
		kid, key, err := NewKey()
		if err != nil {
			return nil, false, err
		}
		out[kid+keyring.KeySuffix] = key
		out[keyring.ActiveEntry] = []byte(kid)
		stamp(kid + ActivatedSuffix)
		stamp(active + RetiredSuffix)
	}
	return out, changed, nil
}

// entryTime reads an RFC 3339 time entry (zero when absent).
func entryTime(data map[string][]byte, name string) (time.Time, error) {
	v, ok := data[name]
	if !ok {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(v)))
	if err != nil {
		return time.Time{}, fmt.Errorf("entry %q is not an RFC 3339 time: %w", name, err)
	}
	return t, nil
}

// Rotate re-reads the key Secret, writes the rotation due at now (Rotation.Rotated), and loads
// the result. Every replica may call it: of replicas rotating at once one writes and the
// others load what it wrote (keyring.Ring.Edit).
func (k *KeyRing) Rotate(ctx context.Context, r Rotation, now time.Time) error {
	return k.ring.Edit(ctx, func(data map[string][]byte) (map[string][]byte, bool, error) { return r.Rotated(data, now) })
}

// Rotator is a Runnable that rotates the ring (Rotate) every r.CheckEvery, in every replica
// (NeedLeaderElection false): each one re-reads the Secret so, and so seals with a new key
// within CheckEvery of its rotation. A failed pass is logged by report and tried at the next.
type Rotator struct {
	Ring     *KeyRing
	Rotation Rotation
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Failed is told a failed pass (nil: ignored).
	Failed func(error)
}

// Start runs the rotation until ctx ends.
func (rt *Rotator) Start(ctx context.Context) error {
	every := rt.Rotation.CheckEvery
	if every <= 0 {
		every = DefaultCheckEvery
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		now := time.Now()
		if rt.Now != nil {
			now = rt.Now()
		}
		if err := rt.Ring.Rotate(ctx, rt.Rotation, now); err != nil && ctx.Err() == nil && rt.Failed != nil {
			rt.Failed(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// NeedLeaderElection: every replica reloads, and may write (the conflict settles it).
func (*Rotator) NeedLeaderElection() bool { return false }

// Package meterpoints holds the use cases of the meter-point register (docs/api.md, "Meters:
// finding a household's meter"): a postcode's meter points searched (answered as sealed references,
// never MPANs), a reference, an MPAN or an address read as the meter point's details. The rules are
// internal/meters'; the register is behind meters.Register; this package speaks no HTTP.
package meterpoints

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/keyring"
	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/sealing"
	"github.com/flexsite/flexsite/internal/validation"
)

// DefaultKeysSecret is the name of the meter references' key Secret in the manager's
// namespace (internal/sealing; created with a fresh key when missing).
const DefaultKeysSecret = "flexsite-meter-ref-keys"

// DefaultKeyRotation is how often a fresh key seals the references (--meter-ref-key-rotation).
const DefaultKeyRotation = 24 * time.Hour

// keyMargin is how long past a reference's lifetime a retired key is kept: the time a replica
// may go on sealing with it before it re-reads the Secret (sealing.DefaultCheckEvery), many
// times over.
const keyMargin = 10 * time.Minute

// KeyRotation is the meter reference keys' rotation (docs/operations.md): a fresh key every
// `every` (zero: none made, retired keys still removed); a retired key kept for a reference's
// lifetime and a margin, so that every reference it sealed opens until it expires, then
// removed.
func KeyRotation(every time.Duration) sealing.Rotation {
	return sealing.Rotation{Every: every, Keep: meters.RefLifetime + keyMargin, CheckEvery: sealing.DefaultCheckEvery}
}

// Service runs the register's use cases.
type Service struct {
	Log      logr.Logger
	Register meters.Register
	// Keys seal the references a search answers.
	Keys *sealing.KeyRing
	Now  func() time.Time
	// Budgets bound the lookups of an organisation and of a household (zero: unbounded), and
	// Lookups counts them (nil: nothing is counted). See spend.
	Budgets meters.Budgets
	Lookups LookupCounter
}

// LookupCounter counts a lookup in its budget windows and answers each window's count with it
// counted (internal/meterstore's LookupCounts, in PostgreSQL: every replica counts alike).
type LookupCounter interface {
	Count(ctx context.Context, organisation string, counters []meters.Counter, now time.Time) ([]int64, error)
}

// SearchResult is one meter point a search found (prod's MeterSearchResponse): its sealed
// reference and its address in one line.
type SearchResult struct {
	Ref     string `json:"ref"`
	Address string `json:"address"`
	// Street is the address lines alone (no town, no postcode), joined ", ": what the hosted
	// flow fills a site's street address with when the household picks this meter point. Not
	// in prod's answer.
	Street string `json:"-"`
}

// streetOf is a meter point's non-empty address lines joined ", ".
func streetOf(p meters.Point) string {
	lines := make([]string, 0, len(p.AddressLines))
	for _, l := range p.AddressLines {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, ", ")
}

// Meter is a meter point's details (prod's MeterResponse).
type Meter struct {
	MPAN              string          `json:"mpan"`
	HalfHourlySettled bool            `json:"half_hourly_settled"`
	SupplierMPID      string          `json:"supplier_mpid"`
	SupplierName      string          `json:"supplier_name"`
	EligibleMarkets   []meters.Market `json:"eligible_markets"`
}

func meterOf(p meters.Point) Meter {
	return Meter{MPAN: p.MPAN, HalfHourlySettled: p.HalfHourlySettled, SupplierMPID: p.SupplierMPID,
		SupplierName: p.SupplierName, EligibleMarkets: p.EligibleMarkets()}
}

// ErrMeterNotFound answers a reference that does not open (altered, forged, another
// organisation's or another key's), has expired, or names a meter point no longer in the
// register: one answer for all, so a caller learns nothing from which.
var ErrMeterNotFound = app.Fail(app.NotFound, "Meter not found")

// ErrRegisterUnavailable answers while the register cannot be read: try again.
var ErrRegisterUnavailable = &app.Error{Kind: app.Unavailable,
	Detail: "The meter register is unavailable; retry", RetryAfter: db.RetryAfterSeconds}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// failed is a register error as the caller is told it.
func (s *Service) failed(err error) error {
	if db.Unavailable(err) {
		s.Log.Info("meter register: the database is unavailable", "error", err.Error())
		return ErrRegisterUnavailable
	}
	return err
}

// spend counts a lookup of the register against the caller's budgets (its organisation's hour
// and day, and, for a household, its own hour: meters.Budgets) just before the register is
// read, so that input refused before any read costs nothing: a lookup past a budget is
// TooManyRequests (429) with Retry-After when its window frees, and reads nothing; the
// database unavailable is ErrRegisterUnavailable (503), as the register's own reads.
func (s *Service) spend(ctx context.Context, p *auth.Principal) error {
	household := ""
	if p.Kind == auth.KindEndUser {
		household = p.SiteName
	}
	now := s.now()
	counters := s.Budgets.Counters(household, now)
	if s.Lookups == nil || len(counters) == 0 {
		metrics.MeterLookups.WithLabelValues(p.Namespace).Inc()
		return nil
	}
	counts, err := s.Lookups.Count(ctx, p.Namespace, counters, now)
	if err != nil {
		return s.failed(err)
	}
	v := meters.Judge(now, counters, counts)
	if !v.Allowed {
		metrics.MeterLookupsRefused.WithLabelValues(p.Namespace, string(v.Refused.Name)).Inc()
		return &app.Error{Kind: app.TooManyRequests, Detail: v.Sentence(),
			RetryAfter: strconv.Itoa(int(v.RetryAfter / time.Second))}
	}
	metrics.MeterLookups.WithLabelValues(p.Namespace).Inc()
	return nil
}

// maxQuotedPostcode bounds the postcode a refusal quotes back: a UK postcode is at most 8
// characters, a few more with stray spaces.
const maxQuotedPostcode = 16

// invalid is a 422 of the register's routes: prod answers them as a sentence (ErrorWithDetail).
func invalid(format string, args ...any) error {
	return app.Fail(app.Invalid, format, args...)
}

// Search is the meter points at a postcode (normalised as every postcode is), filtered by a
// building identifier when one is given (meters.Point.MatchesBuilding), at most
// meters.MaxSearchResults in natural address order, each with a reference sealed for the
// caller's organisation that expires after meters.RefLifetime.
func (s *Service) Search(ctx context.Context, p *auth.Principal, postcode, building string) ([]SearchResult, error) {
	pc, err := validation.NormalisePostcode(postcode)
	if err != nil {
		if len(postcode) > maxQuotedPostcode { // the answer does not echo a page of text
			return nil, invalid("The postcode is not a UK postcode")
		}
		return nil, invalid("%q is not a UK postcode", postcode)
	}
	if len(building) > meters.MaxBuildingBytes {
		return nil, invalid("building_identifier is longer than %d bytes", meters.MaxBuildingBytes)
	}
	limit := meters.MaxSearchResults
	if building != "" {
		limit = meters.MaxAtPostcode
	}
	if err := s.spend(ctx, p); err != nil {
		return nil, err
	}
	points, err := s.Register.AtPostcode(ctx, pc, limit)
	if err != nil {
		return nil, s.failed(err)
	}
	out := make([]SearchResult, 0, min(len(points), meters.MaxSearchResults))
	expires := s.now().Add(meters.RefLifetime)
	for _, pt := range points {
		if len(out) == meters.MaxSearchResults {
			break
		}
		if !pt.MatchesBuilding(building) {
			continue
		}
		ref, err := s.seal(ctx, meters.Ref{MPAN: pt.MPAN, Postcode: pc, Organisation: p.Namespace, Expires: expires})
		if err != nil {
			return nil, err
		}
		out = append(out, SearchResult{Ref: ref, Address: pt.Address(), Street: streetOf(pt)})
	}
	return out, nil
}

func (s *Service) seal(ctx context.Context, r meters.Ref) (string, error) {
	kid, nonce, ciphertext, err := s.Keys.Seal(ctx, r.Plaintext(), r.AdditionalData())
	if err != nil {
		return "", fmt.Errorf("sealing a meter reference: %w", err)
	}
	return meters.EncodeRef(kid, nonce, ciphertext), nil
}

// Open is what a reference stands for (its MPAN and the postcode searched), when it was sealed
// for the caller's organisation and has not expired; ErrMeterNotFound otherwise.
func (s *Service) Open(ctx context.Context, p *auth.Principal, ref string) (meters.Ref, error) {
	kid, nonce, ciphertext, err := meters.DecodeRef(ref, sealing.NonceSize)
	if err != nil {
		return meters.Ref{}, ErrMeterNotFound
	}
	want := meters.Ref{Organisation: p.Namespace}
	plaintext, err := s.Keys.Open(ctx, kid, nonce, ciphertext, want.AdditionalData())
	if err != nil {
		if !errors.Is(err, keyring.ErrUnknownKey) {
			// An unknown key id is a reference of a removed key or a made-up one; anything
			// else (the Secret unreadable) is logged, but still told as not found.
			s.Log.V(1).Info("meter reference does not open", "error", err.Error())
		}
		return meters.Ref{}, ErrMeterNotFound
	}
	r, err := meters.ReadRef(plaintext, p.Namespace, s.now())
	if err != nil {
		return meters.Ref{}, ErrMeterNotFound
	}
	return r, nil
}

// ByRef is the details of the meter point a reference stands for.
func (s *Service) ByRef(ctx context.Context, p *auth.Principal, ref string) (Meter, error) {
	opened, err := s.Open(ctx, p, ref)
	if err != nil {
		return Meter{}, err
	}
	if err := s.spend(ctx, p); err != nil {
		return Meter{}, err
	}
	pt, ok, err := s.Register.ByMPAN(ctx, opened.MPAN)
	switch {
	case err != nil:
		return Meter{}, s.failed(err)
	case !ok:
		return Meter{}, ErrMeterNotFound
	}
	return meterOf(pt), nil
}

// ByMPAN is the details of the meter point of an MPAN: 422 for an MPAN that cannot be one,
// 404 for one the register does not hold.
func (s *Service) ByMPAN(ctx context.Context, p *auth.Principal, mpan string) (Meter, error) {
	core, err := validation.NormaliseMPAN(mpan)
	if err != nil {
		return Meter{}, invalid("%s", err.Error())
	}
	if err := s.spend(ctx, p); err != nil {
		return Meter{}, err
	}
	pt, ok, err := s.Register.ByMPAN(ctx, core)
	switch {
	case err != nil:
		return Meter{}, s.failed(err)
	case !ok:
		return Meter{}, app.Fail(app.NotFound, "No meter point with MPAN %s in the register", core)
	}
	return meterOf(pt), nil
}

// ByAddress is the details of the meter point an address names (meters.Pick among its
// postcode's meter points, ranked by similarity): 422 when the address holds no UK postcode
// or is too long, 404 when no single meter point matches, with how many candidates there were.
func (s *Service) ByAddress(ctx context.Context, p *auth.Principal, address string) (Meter, error) {
	if len(address) > meters.MaxAddressBytes {
		return Meter{}, invalid("The address is longer than %d bytes", meters.MaxAddressBytes)
	}
	if err := validation.SingleLineText(address); err != nil {
		return Meter{}, invalid("The address is not one line of text: %s", err.Error())
	}
	pc, err := meters.PostcodeIn(address)
	if err != nil {
		return Meter{}, invalid("The address must contain a UK postcode")
	}
	if err := s.spend(ctx, p); err != nil {
		return Meter{}, err
	}
	ranked, err := s.Register.Ranked(ctx, pc, address, meters.MaxAtPostcode)
	if err != nil {
		return Meter{}, s.failed(err)
	}
	pt, err := meters.Pick(ranked)
	var none *meters.ErrNoUniqueMeter
	if errors.As(err, &none) {
		return Meter{}, app.Fail(app.NotFound, "No single meter point matches the address (%d candidates at %s); "+
			"use /meter/search to list them and let the household choose", none.Candidates, pc)
	}
	return meterOf(pt), nil
}

// MPANValidation is the answer of an MPAN validated (prod's MPANValidationResponse).
type MPANValidation struct {
	IsValid bool `json:"isValid"`
	// Registered tells whether the register confirmed the meter point (false: no register is
	// loaded, so only the MPAN's form was checked). Not in prod's answer.
	Registered bool `json:"-"`
}

// ValidateMPAN checks that an MPAN is one of a connected import meter: well formed (13 digits,
// check digit valid; refused BadRequest with the problem, prod's MPANValidationError) and held
// by the register (NotFound, the same form, when not). It is a lookup of the register like
// ByMPAN: it tells whether a meter point exists, so it is counted against the caller's budgets
// (spend) and refused 429 past them. While the register holds no meter point at all (none
// imported), the form alone is checked, nothing is counted, and Registered is false.
func (s *Service) ValidateMPAN(ctx context.Context, p *auth.Principal, mpan string) (MPANValidation, error) {
	core, err := validation.NormaliseMPAN(mpan)
	if err != nil {
		return MPANValidation{}, &app.Error{Kind: app.BadRequest, Detail: []string{err.Error()}}
	}
	loaded, err := s.Register.Loaded(ctx)
	if err != nil {
		return MPANValidation{}, s.failed(err)
	}
	if !loaded {
		return MPANValidation{IsValid: true}, nil
	}
	if err := s.spend(ctx, p); err != nil {
		return MPANValidation{}, err
	}
	_, ok, err := s.Register.ByMPAN(ctx, core)
	switch {
	case err != nil:
		return MPANValidation{}, s.failed(err)
	case !ok:
		return MPANValidation{}, &app.Error{Kind: app.NotFound,
			Detail: []string{"No connected import meter with this MPAN was found"}}
	}
	return MPANValidation{IsValid: true, Registered: true}, nil
}

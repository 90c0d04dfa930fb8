// Package ledger holds a page of a site's reward history in the compact form the doors encode
// (the REST API's transactions, the rewards page's statement): the transactions in statement
// order (newest first), each unpacked on demand. The history and its balance are the
// database's (internal/rewardstore); this package holds no sum.
//
// A transaction is one fixed-size value with no pointers: the id as its 16 bytes, times as
// Unix seconds, the date as a day number, the type and payment status as indexes into their
// enumerations. A ledger stores them packed (48 bytes: the times as 32-bit seconds, the date
// as a 16-bit day), one slice already in statement order; At unpacks one.
package ledger

import (
	"bytes"
	"encoding/hex"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
)

// Transaction is one reward transaction, compact (At's copy of a stored one, without its id:
// the ledger's ID and AppendID read that in place). Its accessors give the API's view.
type Transaction struct {
	credit                 int64
	start, end             int64 // Unix seconds
	flexWh                 int64
	settlement             int32 // days since 1970-01-01
	typ, payment           uint16
	hasStart, hasEnd, flex bool
	// oddID and oddDate: the id or settlement date did not have the canonical form (the CRD
	// validates both, so only an object stored before that validation would): they are kept
	// as text in the ledger's odd map, and these flags say so.
	oddID, oddDate bool
}

// Ledger is part of a site's reward history: transactions newest first.
type Ledger struct {
	txs []packed
	// odd holds what does not fit the packed form, by transaction index: ids and dates
	// that are not in canonical form, times outside 1970-2106.
	odd map[int]oddText
}

type oddText struct {
	id, date   string
	start, end int64
}

// packed is how a ledger stores a transaction: 48 bytes, no pointers. Times are Unix
// seconds in 32 bits (1970 to 2106) and the settlement date a day in 16 bits (1970 to
// 2149); a value outside those ranges is kept in the ledger's odd map, as are ids and dates
// that are not in canonical form, and flags say so.
type packed struct {
	id           [16]byte
	credit       int64
	flexWh       int64
	start, end   uint32
	settlement   uint16 // days since 1970-01-01; packedNoDate when none
	typ, payment uint16
	flags        uint8
}

const (
	hasStart uint8 = 1 << iota
	hasEnd
	hasFlex
	oddID
	oddDate
	wideTimes // start and end are in the odd map
)

const packedNoDate = uint16(1<<16 - 1)

// oddBytes is what a transaction in the odd map costs beside its packed form, rounded up: the
// entry, its texts and the map's slot.
const oddBytes = 128

// Size is the memory the ledger holds, for a bound on kept ledgers: 48 bytes a transaction
// (packed, no pointers), and more for the few that do not fit that form.
func (l *Ledger) Size() int {
	return cap(l.txs)*int(unsafe.Sizeof(packed{})) + len(l.odd)*oddBytes
}

// Trim gives back the room Append left for more transactions: for a ledger that is kept.
func (l *Ledger) Trim() {
	if cap(l.txs) > len(l.txs) {
		l.txs = slices.Clone(l.txs)
	}
}

// Grow makes room for n more transactions: a reader that knows how many rows may come packs
// them without growing the ledger row by row.
func (l *Ledger) Grow(n int) { l.txs = slices.Grow(l.txs, n) }

// Reset empties the ledger, keeping its room: a reader that walks a history a batch at a time
// packs every batch into the same memory. Never for a ledger that is kept (Trim): others read it.
func (l *Ledger) Reset() {
	l.txs = l.txs[:0]
	clear(l.odd)
}

// Len is the number of transactions.
func (l *Ledger) Len() int {
	if l == nil {
		return 0
	}
	return len(l.txs)
}

// At is the i-th transaction, newest first.
func (l *Ledger) At(i int) Transaction {
	p := &l.txs[i]
	tx := Transaction{credit: p.credit, flexWh: p.flexWh, typ: p.typ, payment: p.payment,
		start: int64(p.start), end: int64(p.end), settlement: noDate,
		hasStart: p.flags&hasStart != 0, hasEnd: p.flags&hasEnd != 0, flex: p.flags&hasFlex != 0,
		oddID: p.flags&oddID != 0, oddDate: p.flags&oddDate != 0}
	if p.flags&wideTimes != 0 {
		tx.start, tx.end = l.odd[i].start, l.odd[i].end
	}
	if !tx.oddDate && p.settlement != packedNoDate {
		tx.settlement = int32(p.settlement)
	}
	return tx
}

// Time is when the i-th transaction happened (household.TransactionAt): its start, else its
// settlement date (zero when it has neither).
func (l *Ledger) Time(i int) time.Time {
	var start *time.Time
	tx := l.At(i)
	if t, ok := tx.StartTime(); ok {
		start = &t
	}
	return household.TransactionAt(start, l.SettlementDate(i))
}

// ID is the i-th transaction's id.
func (l *Ledger) ID(i int) string {
	tx := &l.txs[i]
	if tx.flags&oddID != 0 {
		return l.odd[i].id
	}
	return formatUUID(tx.id)
}

// AppendID appends the i-th transaction's id to b without allocating.
func (l *Ledger) AppendID(b []byte, i int) []byte {
	tx := &l.txs[i]
	if tx.flags&oddID != 0 {
		return append(b, l.odd[i].id...)
	}
	return appendUUID(b, tx.id)
}

// Canonical reports whether the i-th transaction's id is a canonical UUID and its date is
// YYYY-MM-DD or none: then AppendID and AppendSettlementDate write only [0-9a-f-].
func (l *Ledger) Canonical(i int) bool { return l.txs[i].flags&(oddID|oddDate) == 0 }

// SettlementDate is the i-th transaction's settlement date, YYYY-MM-DD ("" when none).
func (l *Ledger) SettlementDate(i int) string {
	tx := &l.txs[i]
	switch {
	case tx.flags&oddDate != 0:
		return l.odd[i].date
	case tx.settlement == packedNoDate:
		return ""
	}
	return string(appendDate(nil, int32(tx.settlement)))
}

// AppendSettlementDate appends the i-th transaction's settlement date ("" when none).
func (l *Ledger) AppendSettlementDate(b []byte, i int) []byte {
	tx := &l.txs[i]
	switch {
	case tx.flags&oddDate != 0:
		return append(b, l.odd[i].date...)
	case tx.settlement == packedNoDate:
		return b
	}
	return appendDate(b, int32(tx.settlement))
}

// CreditPence is the amount credited (negative for a withdrawal).
func (t *Transaction) CreditPence() int64 { return t.credit }

// Type is the transaction's type.
func (t *Transaction) Type() flexv1.TransactionType { return flexv1.TransactionType(words.text(t.typ)) }

// PaymentStatus is a withdrawal's payment status ("" when none).
func (t *Transaction) PaymentStatus() flexv1.PaymentStatus {
	return flexv1.PaymentStatus(words.text(t.payment))
}

// StartTime and EndTime are the transaction's times; ok is false when it has none.
func (t *Transaction) StartTime() (time.Time, bool) { return time.Unix(t.start, 0).UTC(), t.hasStart }
func (t *Transaction) EndTime() (time.Time, bool)   { return time.Unix(t.end, 0).UTC(), t.hasEnd }

// StartUnix and EndUnix are the transaction's times as Unix seconds.
func (t *Transaction) StartUnix() (int64, bool) { return t.start, t.hasStart }
func (t *Transaction) EndUnix() (int64, bool)   { return t.end, t.hasEnd }

// SettlementDay is the settlement date of a Canonical transaction as days since
// 1970-01-01; ok is false when it has none.
func (t *Transaction) SettlementDay() (int64, bool) {
	return int64(t.settlement), !t.oddDate && t.settlement != noDate
}

// FlexWh is the flexibility energy in watt-hours; ok is false when it has none.
func (t *Transaction) FlexWh() (int64, bool) { return t.flexWh, t.flex }

// noDate marks a transaction without a settlement date.
const noDate = int32(-1 << 31)

// New builds the compact form of transactions of a site's history (in any order).
func New(txs []flexv1.RewardTransaction) *Ledger {
	l := &Ledger{}
	type keyed struct {
		at time.Time
		tx *flexv1.RewardTransaction
	}
	keys := make([]keyed, len(txs))
	for i := range txs {
		keys[i] = keyed{at: transactionTime(&txs[i]), tx: &txs[i]}
	}
	// Statement order: newest first, ties broken by id so pages are stable.
	slices.SortFunc(keys, func(a, b keyed) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		return strings.Compare(a.tx.ID, b.tx.ID)
	})
	l.txs = make([]packed, 0, len(keys))
	for _, k := range keys {
		src := k.tx
		r := Row{Type: src.Type, PaymentStatus: src.PaymentStatus, CreditPence: src.CreditPence}
		if src.StartTime != nil {
			r.Start, r.HasStart = src.StartTime.Unix(), true
		}
		if src.EndTime != nil {
			r.End, r.HasEnd = src.EndTime.Unix(), true
		}
		if src.FlexWh != nil {
			r.FlexWh, r.HasFlex = *src.FlexWh, true
		}
		var ok bool
		if r.ID, ok = parseUUID(src.ID); !ok {
			r.OddID, r.IDText = true, src.ID
		}
		day, ok := parseDate(src.SettlementDate)
		switch {
		case !ok:
			r.OddDate, r.DateText = true, src.SettlementDate
		case day != noDate:
			r.SettlementDay, r.HasSettlement = day, true
		}
		l.Append(&r)
	}
	return l
}

// Row is one transaction for Append, as a store reads it: the id as its 16 bytes, the times
// as Unix seconds, the settlement date as days since 1970-01-01. An id that is not a
// canonical UUID, or a date that is not YYYY-MM-DD, comes as text instead (OddID, OddDate).
type Row struct {
	ID               [16]byte
	OddID            bool
	IDText           string
	Type             flexv1.TransactionType
	PaymentStatus    flexv1.PaymentStatus
	CreditPence      int64
	Start, End       int64
	HasStart, HasEnd bool
	FlexWh           int64
	HasFlex          bool
	SettlementDay    int32
	HasSettlement    bool
	OddDate          bool
	DateText         string
}

// Append adds r after the ledger's last transaction: the caller gives them in statement order
// (newest first, ties by id), as the database's page query answers them, so a page is packed
// straight from its rows with nothing sorted or parsed again.
func (l *Ledger) Append(r *Row) {
	i := len(l.txs)
	dst := packed{id: r.ID, credit: r.CreditPence, settlement: packedNoDate,
		typ: words.index(string(r.Type)), payment: words.index(string(r.PaymentStatus))}
	var start, end int64
	if r.HasStart {
		start = r.Start
		dst.flags |= hasStart
	}
	if r.HasEnd {
		end = r.End
		dst.flags |= hasEnd
	}
	if fitsUint32(start) && fitsUint32(end) {
		dst.start, dst.end = uint32(start), uint32(end)
	} else {
		dst.flags |= wideTimes
	}
	if r.HasFlex {
		dst.flexWh = r.FlexWh
		dst.flags |= hasFlex
	}
	odd := oddText{start: start, end: end}
	if r.OddID {
		dst.flags |= oddID
		odd.id = r.IDText
	}
	switch {
	case r.OddDate:
		dst.flags |= oddDate
		odd.date = r.DateText
	case !r.HasSettlement:
	case r.SettlementDay < 0 || r.SettlementDay >= int32(packedNoDate):
		dst.flags |= oddDate
		odd.date = string(appendDate(nil, r.SettlementDay))
	default:
		dst.settlement = uint16(r.SettlementDay)
	}
	if dst.flags&(oddID|oddDate|wideTimes) != 0 {
		if l.odd == nil {
			l.odd = map[int]oddText{}
		}
		l.odd[i] = odd
	}
	l.txs = append(l.txs, dst)
}

func fitsUint32(v int64) bool { return v >= 0 && v <= 1<<32-1 }

// transactionTime is when a transaction happened, as the household core says.
func transactionTime(tx *flexv1.RewardTransaction) time.Time { return household.TransactionTime(*tx) }

// parseUUID reads a canonical (lowercase, hyphenated) UUID; ok is false for anything else,
// so that formatting the bytes gives back exactly the text.
func parseUUID(s string) (id [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, false
	}
	var digits [32]byte
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			continue
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f':
			digits[n] = c
			n++
		default:
			return id, false
		}
	}
	if _, err := hex.Decode(id[:], digits[:]); err != nil {
		return id, false
	}
	return id, true
}

// appendUUID writes the id's canonical text straight into b (a page writes one per item):
// each byte's two digits from hexPairs, into room made without writing it first.
func appendUUID(b []byte, id [16]byte) []byte {
	n := len(b)
	b = slices.Grow(b, 36)[:n+36]
	out := (*[36]byte)(b[n:])
	j := 0
	for i, c := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out[j] = '-'
			j++
		}
		pair := &hexPairs[c]
		out[j], out[j+1] = pair[0], pair[1]
		j += 2
	}
	return b
}

// hexPairs are the two lower-case hex digits of every byte.
var hexPairs = func() (t [256][2]byte) {
	const digits = "0123456789abcdef"
	for i := range t {
		t[i] = [2]byte{digits[i>>4], digits[i&0x0f]}
	}
	return t
}()

func formatUUID(id [16]byte) string { return string(appendUUID(make([]byte, 0, 36), id)) }

// parseDate reads YYYY-MM-DD as a day number; "" is noDate. ok is false when the text would
// not come back the same from the day number.
func parseDate(s string) (int32, bool) {
	if s == "" {
		return noDate, true
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return noDate, false
	}
	day := int32(t.Unix() / 86400)
	if !bytes.Equal(appendDate(nil, day), []byte(s)) {
		return noDate, false
	}
	return day, true
}

func appendDate(b []byte, day int32) []byte {
	return time.Unix(int64(day)*86400, 0).UTC().AppendFormat(b, time.DateOnly)
}

// words interns the enumerations' texts (transaction types, payment statuses): a
// transaction holds an index. The CRD allows a handful of values; the table grows only if
// a new version of it allows more.
var words = newWordTable()

type wordTable struct {
	mu sync.Mutex // serialises additions
	// byText and texts are replaced, never changed in place: readers load them without a
	// lock (a page packs two words a row).
	byText atomic.Pointer[map[string]uint16]
	texts  atomic.Pointer[[]string]
}

func newWordTable() *wordTable {
	w := &wordTable{}
	w.byText.Store(&map[string]uint16{"": 0})
	w.texts.Store(&[]string{""})
	return w
}

func (w *wordTable) index(s string) uint16 {
	if i, ok := (*w.byText.Load())[s]; ok {
		return i
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	byText := *w.byText.Load()
	if i, ok := byText[s]; ok {
		return i
	}
	old := *w.texts.Load()
	texts := append(slices.Clip(old), strings.Clone(s))
	i := uint16(len(old))
	next := maps.Clone(byText)
	next[texts[i]] = i
	w.texts.Store(&texts) // before the index is found: a reader of i finds its text
	w.byText.Store(&next)
	return i
}

func (w *wordTable) text(i uint16) string { return (*w.texts.Load())[i] }

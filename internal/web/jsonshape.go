package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/flexsite/flexsite/internal/app"
)

// MaxDepth bounds how deeply a JSON body nests (docs/api.md): objects and lists inside each
// other, the body's own object being the first level. A body nested deeper is a 422
// (json_invalid) found at the byte that opens the level past it, before a decoder holds
// anything of it; the check itself keeps a stack of MaxDepth levels, never one per level sent.
const MaxDepth = 32

// MaxObjectKeys bounds the keys of one object of a JSON body, as MaxListItems bounds a list:
// one more is a 422 (too_long) at the object.
const MaxObjectKeys = MaxListItems

// A JSON body is also refused (422) when one of its objects has a key twice (duplicate_key,
// at the key: which of the two a client meant is not for the server to guess), and when a
// text in it is not valid UTF-8, or escapes half of a UTF-16 surrogate pair (json_invalid:
// Go's decoder would replace either with U+FFFD without a word).

// manyKeys is how many keys of an object are compared one by one for a key sent twice; past
// it, an object's keys are looked up in a map.
const manyKeys = 16

// jsonShape checks the shape of a JSON text as its bytes go by (checkJSONShape, JSONShaped):
// the nesting depth, the keys of each object (how many, and none twice) and the texts' UTF-8.
// It does not check the grammar, which is the decoder's: on a text that is not JSON it may
// refuse something the decoder would have refused anyway, and it never panics. Its memory is
// the keys of the objects open at a time (at most MaxDepth of them), never more than the body.
type jsonShape struct {
	off    int64 // offset of the next byte
	depth  int
	levels [MaxDepth]shapeLevel
	err    error
	// long is set once a list has reached MaxListItems items: the decoder refuses the next.
	long bool

	inString bool
	isKey    bool   // the text being read is a key of an object
	key      []byte // a key's bytes as sent, between its quotes
	escaped  bool   // the key has an escape
	esc      int    // 0: no escape; 1: after a backslash; 2 to 5: after \u and esc-2 hex digits
	hex      rune   // the \u escape's digits so far
	high     bool   // a high surrogate's escape was just read: its low one must follow
	need     int    // UTF-8 continuation bytes still to come
	lo, hi   byte   // the range of the next continuation byte
}

// shapeLevel is one open object or list.
type shapeLevel struct {
	object    bool
	expectKey bool // an object's next text is a key
	// n is a list's index of the current item, or an object's number of keys so far.
	n int
	// names holds an object's keys so far (as decoded), the i-th ending at ends[i].
	names []byte
	ends  []int
	// many holds them too once there are more than manyKeys (mapped).
	many   map[string]struct{}
	mapped bool
}

// checkJSONShape checks a whole JSON text (its refusal: a 422 in the documented form).
func checkJSONShape(data []byte) error {
	var s jsonShape
	_, err := s.feed(data)
	return err
}

// JSONShaped wraps a JSON body read as a stream: its bytes pass through the checks of
// checkJSONShape as they are read, and the first byte that fails them is not passed on:
// the read fails instead, with an error BodyError tells as the 422. The decoder that reads it
// never sees a body nested deeper than MaxDepth.
func JSONShaped(r io.Reader) io.Reader { return &shapedReader{r: r} }

type shapedReader struct {
	r     io.Reader
	shape jsonShape
}

func (s *shapedReader) Read(p []byte) (int, error) {
	if s.shape.err != nil {
		return 0, shapeError{s.shape.err}
	}
	n, err := s.r.Read(p)
	if k, bad := s.shape.feed(p[:n]); bad != nil {
		return k, shapeError{bad}
	}
	return n, err
}

// shapeError is a shaped body's refusal (an *app.Error), as the reader's error.
type shapeError struct{ err error }

func (e shapeError) Error() string { return e.err.Error() }
func (e shapeError) Unwrap() error { return e.err }

// feed checks the next bytes of the text: on a refusal, it answers how many bytes passed
// before the one refused, and the refusal (again for any later bytes).
func (s *jsonShape) feed(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	for i := 0; i < len(p); i++ {
		if s.inString {
			if s.need == 0 && s.esc == 0 && !s.high {
				// The plain run of a text: printable ASCII, no quote, no escape.
				j := i
				for j < len(p) && p[j] >= 0x20 && p[j] < utf8Self && p[j] != '"' && p[j] != '\\' {
					j++
				}
				if s.isKey {
					s.key = append(s.key, p[i:j]...)
				}
				if i = j; i == len(p) {
					break
				}
			}
			if err := s.stringByte(p[i]); err != nil {
				return s.fail(i, err)
			}
			continue
		}
		var err error
		switch p[i] {
		case '{', '[':
			err = s.open(p[i] == '{')
		case '}', ']':
			if s.depth > 0 {
				s.depth--
			}
		case ',':
			if s.depth > 0 {
				if l := &s.levels[s.depth-1]; l.object {
					l.expectKey = true
				} else if l.n++; l.n >= MaxListItems {
					s.long = true
				}
			}
		case '"':
			s.inString, s.isKey, s.escaped = true, false, false
			if s.depth > 0 {
				if l := &s.levels[s.depth-1]; l.object && l.expectKey {
					s.isKey, l.expectKey = true, false
					s.key = s.key[:0]
				}
			}
		}
		if err != nil {
			return s.fail(i, err)
		}
	}
	s.off += int64(len(p))
	return len(p), nil
}

const utf8Self = 0x80

func (s *jsonShape) fail(i int, err error) (int, error) {
	s.off += int64(i)
	if bad, ok := err.(notJSON); ok {
		err = app.InvalidFields(app.Field(string(bad), "json_invalid", "body", s.off))
	}
	s.err = err
	return i, err
}

// open enters an object or a list.
func (s *jsonShape) open(object bool) error {
	if s.depth == MaxDepth {
		return s.invalid(fmt.Sprintf("JSON decode error: nested deeper than %d levels", MaxDepth))
	}
	l := &s.levels[s.depth]
	s.depth++
	l.object, l.expectKey, l.n = object, object, 0
	l.names, l.ends = l.names[:0], l.ends[:0]
	if l.mapped {
		clear(l.many)
		l.mapped = false
	}
	return nil
}

// stringByte reads a byte of a text (after its opening quote) that is not of a plain run.
func (s *jsonShape) stringByte(c byte) error {
	switch {
	case s.need > 0:
		if c < s.lo || c > s.hi {
			return s.invalid("JSON decode error: the text is not valid UTF-8")
		}
		s.need--
		s.lo, s.hi = 0x80, 0xBF
	case s.esc == 1:
		if c == 'u' {
			s.esc, s.hex = 2, 0
		} else {
			if s.high {
				return s.invalid("JSON decode error: half of a surrogate pair")
			}
			s.esc = 0
		}
	case s.esc >= 2:
		return s.escapeDigit(c)
	case s.high && c != '\\':
		return s.invalid("JSON decode error: half of a surrogate pair")
	case c == '\\':
		s.esc, s.escaped = 1, true
	case c == '"':
		s.inString = false
		if s.isKey {
			return s.keyRead()
		}
		return nil
	case c >= utf8Self:
		var ok bool
		if s.need, s.lo, s.hi, ok = utf8Lead(c); !ok {
			return s.invalid("JSON decode error: the text is not valid UTF-8")
		}
	}
	if s.isKey {
		s.key = append(s.key, c)
	}
	return nil
}

// escapeDigit reads a byte of a \u escape's four hex digits: the escape's code unit, once
// whole, must not be half of a surrogate pair.
func (s *jsonShape) escapeDigit(c byte) error {
	d := hexDigit(c)
	if d < 0 { // not an escape (the decoder's to refuse): c read as it is
		s.esc, s.high = 0, false
		return s.stringByte(c)
	}
	s.hex = s.hex<<4 | d
	if s.esc++; s.esc < 6 {
		return s.keep(c)
	}
	s.esc = 0
	low := s.hex >= 0xDC00 && s.hex <= 0xDFFF
	switch {
	case s.high != low:
		return s.invalid("JSON decode error: half of a surrogate pair")
	case s.high:
		s.high = false
	case s.hex >= 0xD800 && s.hex <= 0xDBFF:
		s.high = true
	}
	return s.keep(c)
}

// keep adds a byte of a key's text to the key (what makes two spellings of a key one is
// decided when the key is whole).
func (s *jsonShape) keep(c byte) error {
	if s.isKey {
		s.key = append(s.key, c)
	}
	return nil
}

// utf8Lead is what a byte that starts a multi-byte UTF-8 sequence asks of the bytes after it:
// how many, and the range of the first (RFC 3629: no overlong form, no surrogate, nothing
// past U+10FFFF); ok is false for a byte that starts none.
func utf8Lead(c byte) (need int, lo, hi byte, ok bool) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 1, 0x80, 0xBF, true
	case c == 0xE0:
		return 2, 0xA0, 0xBF, true
	case c == 0xED:
		return 2, 0x80, 0x9F, true
	case c >= 0xE1 && c <= 0xEF:
		return 2, 0x80, 0xBF, true
	case c == 0xF0:
		return 3, 0x90, 0xBF, true
	case c >= 0xF1 && c <= 0xF3:
		return 3, 0x80, 0xBF, true
	case c == 0xF4:
		return 3, 0x80, 0x8F, true
	}
	return 0, 0, 0, false
}

func hexDigit(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10
	}
	return -1
}

// keyRead takes the key just read into its object: one more than MaxObjectKeys, or one the
// object already has, is refused.
func (s *jsonShape) keyRead() error {
	l := &s.levels[s.depth-1]
	key := s.key
	if s.escaped {
		var k string
		if err := json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &k); err != nil {
			return nil // a bad escape: the decoder's to refuse
		}
		key = []byte(k)
	}
	if l.n == MaxObjectKeys {
		return app.InvalidFields(app.Field(fmt.Sprintf("Object should have at most %d keys", MaxObjectKeys),
			"too_long", s.loc(s.depth-1)...))
	}
	l.n++
	twice := false
	if l.mapped {
		_, twice = l.many[string(key)]
	} else {
		start := 0
		for _, end := range l.ends {
			if bytes.Equal(l.names[start:end], key) {
				twice = true
				break
			}
			start = end
		}
	}
	if twice {
		return app.InvalidFields(app.Field("Duplicate key: a key may appear once in an object", "duplicate_key",
			append(s.loc(s.depth-1), string(key))...))
	}
	l.names = append(l.names, key...)
	l.ends = append(l.ends, len(l.names))
	switch {
	case l.mapped:
		l.many[string(key)] = struct{}{}
	case len(l.ends) > manyKeys:
		if l.many == nil {
			l.many = make(map[string]struct{}, 2*manyKeys)
		}
		start := 0
		for _, end := range l.ends {
			l.many[string(l.names[start:end])] = struct{}{}
			start = end
		}
		l.mapped = true
	}
	return nil
}

// loc is where the value of the first levels levels being read is: "body", then each level's
// current key or index.
func (s *jsonShape) loc(levels int) []any {
	loc := make([]any, 1, levels+2)
	loc[0] = "body"
	for i := range levels {
		l := &s.levels[i]
		switch {
		case !l.object:
			loc = append(loc, l.n)
		case len(l.ends) > 0:
			start := 0
			if len(l.ends) > 1 {
				start = l.ends[len(l.ends)-2]
			}
			loc = append(loc, string(l.names[start:l.ends[len(l.ends)-1]]))
		}
	}
	return loc
}

// invalid is a refusal of the text at the current byte: json_invalid, at its offset as the
// decoder's own refusals are (fail adds it).
func (s *jsonShape) invalid(msg string) error { return notJSON(msg) }

type notJSON string

func (e notJSON) Error() string { return string(e) }

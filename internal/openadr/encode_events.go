package openadr

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/web/jsonappend"
)

// eventsAnswer is a page of events written without reflection (web.Appender), byte for byte
// as encoding/json's Encoder writes the same []oadr.Event: a VEN polls the search, and its
// pages are the door's largest answers. The events are shaped as everywhere (EventShape); only
// their encoding is this.
type eventsAnswer []oadr.Event

// AppendJSON writes the answer (web.Appender).
func (a eventsAnswer) AppendJSON(b []byte) []byte {
	if a == nil {
		return append(b, "null\n"...)
	}
	b = append(b, '[')
	for i := range a {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEvent(b, &a[i])
	}
	return append(b, "]\n"...)
}

// fields writes an object's fields in the generated struct's order (encoding/json's), each
// with its comma: next(b, name) opens the field.
type fields struct{ n int }

func (f *fields) next(b []byte, name string) []byte {
	if f.n > 0 {
		b = append(b, ',')
	}
	f.n++
	b = append(b, '"')
	b = append(b, name...)
	return append(b, `":`...)
}

func appendEvent(b []byte, e *oadr.Event) []byte {
	var f fields
	b = append(b, '{')
	if e.CreatedDateTime != nil {
		b = appendDateTime(f.next(b, "createdDateTime"), *e.CreatedDateTime)
	}
	if e.EventName != nil {
		b = jsonappend.String(f.next(b, "eventName"), *e.EventName)
	}
	if e.Id != nil {
		b = jsonappend.String(f.next(b, "id"), *e.Id)
	}
	if e.IntervalPeriod != nil {
		b = appendIntervalPeriod(f.next(b, "intervalPeriod"), e.IntervalPeriod)
	}
	b = f.next(b, "intervals")
	if e.Intervals == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range e.Intervals {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendInterval(b, &e.Intervals[i])
		}
		b = append(b, ']')
	}
	if e.ModificationDateTime != nil {
		b = appendDateTime(f.next(b, "modificationDateTime"), *e.ModificationDateTime)
	}
	if e.ObjectType != nil {
		b = jsonappend.String(f.next(b, "objectType"), string(*e.ObjectType))
	}
	if e.PayloadDescriptors != nil {
		b = f.next(b, "payloadDescriptors")
		if *e.PayloadDescriptors == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for i, d := range *e.PayloadDescriptors {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendEventPayloadDescriptor(b, d)
			}
			b = append(b, ']')
		}
	}
	if e.Priority != nil {
		b = strconv.AppendInt(f.next(b, "priority"), int64(*e.Priority), 10)
	}
	b = jsonappend.String(f.next(b, "programID"), e.ProgramID)
	if e.ReportDescriptors != nil {
		b = f.next(b, "reportDescriptors")
		if *e.ReportDescriptors == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for i := range *e.ReportDescriptors {
				if i > 0 {
					b = append(b, ',')
				}
				b = appendReportDescriptor(b, &(*e.ReportDescriptors)[i])
			}
			b = append(b, ']')
		}
	}
	if e.Targets != nil {
		b = appendValuesMaps(f.next(b, "targets"), *e.Targets)
	}
	return append(b, '}')
}

func appendIntervalPeriod(b []byte, p *oadr.IntervalPeriod) []byte {
	var f fields
	b = append(b, '{')
	if p.Duration != nil {
		b = jsonappend.String(f.next(b, "duration"), *p.Duration)
	}
	if p.RandomizeStart != nil {
		b = jsonappend.String(f.next(b, "randomizeStart"), *p.RandomizeStart)
	}
	b = appendDateTime(f.next(b, "start"), p.Start)
	return append(b, '}')
}

func appendInterval(b []byte, iv *oadr.Interval) []byte {
	var f fields
	b = append(b, '{')
	b = strconv.AppendInt(f.next(b, "id"), int64(iv.Id), 10)
	if iv.IntervalPeriod != nil {
		b = appendIntervalPeriod(f.next(b, "intervalPeriod"), iv.IntervalPeriod)
	}
	b = appendValuesMaps(f.next(b, "payloads"), iv.Payloads)
	return append(b, '}')
}

func appendEventPayloadDescriptor(b []byte, d oadr.EventPayloadDescriptor) []byte {
	var f fields
	b = append(b, '{')
	if d.Currency != nil {
		b = jsonappend.String(f.next(b, "currency"), *d.Currency)
	}
	if d.ObjectType != nil {
		b = jsonappend.String(f.next(b, "objectType"), string(*d.ObjectType))
	}
	b = jsonappend.String(f.next(b, "payloadType"), d.PayloadType)
	if d.Units != nil {
		b = jsonappend.String(f.next(b, "units"), *d.Units)
	}
	return append(b, '}')
}

func appendReportDescriptor(b []byte, d *oadr.ReportDescriptor) []byte {
	var f fields
	b = append(b, '{')
	if d.Aggregate != nil {
		b = strconv.AppendBool(f.next(b, "aggregate"), *d.Aggregate)
	}
	if d.Frequency != nil {
		b = strconv.AppendInt(f.next(b, "frequency"), int64(*d.Frequency), 10)
	}
	if d.Historical != nil {
		b = strconv.AppendBool(f.next(b, "historical"), *d.Historical)
	}
	if d.NumIntervals != nil {
		b = strconv.AppendInt(f.next(b, "numIntervals"), int64(*d.NumIntervals), 10)
	}
	b = jsonappend.String(f.next(b, "payloadType"), d.PayloadType)
	if d.ReadingType != nil {
		b = jsonappend.String(f.next(b, "readingType"), *d.ReadingType)
	}
	if d.Repeat != nil {
		b = strconv.AppendInt(f.next(b, "repeat"), int64(*d.Repeat), 10)
	}
	if d.StartInterval != nil {
		b = strconv.AppendInt(f.next(b, "startInterval"), int64(*d.StartInterval), 10)
	}
	if d.Targets != nil {
		b = appendValuesMaps(f.next(b, "targets"), *d.Targets)
	}
	if d.Units != nil {
		b = jsonappend.String(f.next(b, "units"), *d.Units)
	}
	return append(b, '}')
}

func appendValuesMaps(b []byte, ms []oadr.ValuesMap) []byte {
	if ms == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":`...)
		b = jsonappend.String(b, ms[i].Type)
		b = append(b, `,"values":`...)
		if ms[i].Values == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for j := range ms[i].Values {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendValue(b, &ms[i].Values[j])
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendValue writes one value of a valuesMap (a union, kept as its JSON): as it is when it is
// compact and HTML-safe already (what valuesMap makes), else through encoding/json, which
// compacts and escapes it as the Encoder does.
func appendValue(b []byte, v *oadr.ValuesMap_Values_Item) []byte {
	raw, err := v.MarshalJSON()
	if err == nil && plainRaw(raw) {
		return append(b, raw...)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return append(b, "null"...) // the Encoder fails here; valuesMap never makes one
	}
	return append(b, out...)
}

// plainRaw tells whether raw JSON is written as the Encoder would write it: printable ASCII,
// no white space and no HTML character.
func plainRaw(raw []byte) bool {
	if len(raw) == 0 {
		return false
	}
	for _, c := range raw {
		if c <= ' ' || c >= 0x7f || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// appendDateTime writes t quoted, as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds): whole UTC seconds without parsing the layout.
func appendDateTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	if t.Nanosecond() == 0 && t.Location() == time.UTC {
		b = jsonappend.RFC3339(b, t.Unix())
	} else {
		b = t.AppendFormat(b, time.RFC3339Nano)
	}
	return append(b, '"')
}

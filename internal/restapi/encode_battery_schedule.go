package restapi

import (
	"time"

	"github.com/flexsite/flexsite/internal/app/pricing"
	"github.com/flexsite/flexsite/internal/web/jsonappend"
)

// batteryScheduleAnswer is a BatteryScheduleResponse written without reflection
// (web.Appender), byte for byte as encoding/json writes it: the read is a hot one.
type batteryScheduleAnswer pricing.BatteryScheduleResponse

// AppendJSON writes the answer (web.Appender).
func (a batteryScheduleAnswer) AppendJSON(b []byte) []byte {
	b = append(b, `{"schedule_steps":[`...)
	for i, s := range a.ScheduleSteps {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"start_timestamp":"`...)
		b = appendTime(b, s.Start)
		b = append(b, `","end_timestamp":"`...)
		b = appendTime(b, s.End)
		b = append(b, `","action":`...)
		b = jsonappend.String(b, string(s.Action))
		b = append(b, `,"allow_deviation":`...)
		if s.AllowDeviation {
			b = append(b, "true}"...)
		} else {
			b = append(b, "false}"...)
		}
	}
	b = append(b, `],"schedule_last_updated":"`...)
	b = appendTime(b, a.ScheduleLastUpdated)
	return append(b, "\"}\n"...)
}

// appendTime writes t as time.Time's MarshalJSON does (RFC 3339 with nanoseconds, without the
// quotes): whole UTC seconds without parsing the layout.
func appendTime(b []byte, t time.Time) []byte {
	if t.Nanosecond() == 0 && t.Location() == time.UTC {
		return jsonappend.RFC3339(b, t.Unix())
	}
	return t.AppendFormat(b, time.RFC3339Nano)
}

package household

import (
	"strings"
	"time"

	"github.com/flexsite/flexsite/internal/settlement"
)

// ChargingBlock is a charging block of an EV schedule the household's car was given.
type ChargingBlock struct{ Start, End time.Time }

// ChargingWindowSentence tells the household when its car will charge, from the blocks of its
// latest plug-in schedule answer still to come at now (a block under way counts; ended ones do
// not): "Your car will charge 01:00–04:30, when energy is cheapest". Times are UK local; several
// blocks are joined with commas and "and"; the first block of a later day than now's says
// "tomorrow" (within the week "on Monday", beyond "on 2 January"). cheapest is whether Flexsite chose the blocks (false when
// the request came back unchanged: then the sentence makes no claim about price). "" when no
// block is still to come.
func ChargingWindowSentence(blocks []ChargingBlock, cheapest bool, now time.Time) string {
	london := settlement.London
	today := dayOf(now.In(london))
	var parts []string
	lastDay := today
	for _, b := range blocks {
		if !b.End.After(now) {
			continue
		}
		s, e := b.Start.In(london), b.End.In(london)
		text := s.Format("15:04") + "–" + e.Format("15:04")
		if d := dayOf(s); d.After(lastDay) {
			switch {
			case d.Equal(today.AddDate(0, 0, 1)):
				text = "tomorrow " + text
			case d.Before(today.AddDate(0, 0, 7)):
				text = "on " + s.Format("Monday") + " " + text
			default: // a weekday alone would name a nearer day
				text = "on " + s.Format("2 January") + " " + text
			}
			lastDay = d
		}
		parts = append(parts, text)
	}
	if len(parts) == 0 {
		return ""
	}
	joined := parts[0]
	if n := len(parts); n > 1 {
		joined = strings.Join(parts[:n-1], ", ") + " and " + parts[n-1]
	}
	if cheapest {
		return "Your car will charge " + joined + ", when energy is cheapest"
	}
	return "Your car will charge " + joined
}

func dayOf(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

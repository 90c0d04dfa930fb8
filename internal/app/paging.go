package app

import "math"

// Paging selects a page of a list: Limit items from Offset (the door bounds both).
type Paging struct{ Limit, Offset int }

// window is the part of a list of total items a Paging selects: items [from, to), the number
// of pages and the 1-based number of the page (an offset past the end selects nothing, and
// still has a page number).
type window struct {
	from, to           int
	totalPages, number int
}

func (p Paging) window(total int) window {
	limit, offset := max(p.Limit, 1), max(p.Offset, 0)
	from := min(offset, total)
	w := window{from: from, to: from + min(limit, total-from), totalPages: (total + limit - 1) / limit, number: offset / limit}
	if w.number < math.MaxInt { // offset math.MaxInt with limit 1 has no next number
		w.number++
	}
	return w
}

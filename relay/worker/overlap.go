package worker

import (
	"strings"
	"unicode/utf8"
)

// The overlap heuristic. A model asked in prompt mode to continue an
// answer often starts by repeating its last words. The relay strips such a
// repeat so the client does not see it twice: if the continuation starts
// with text that is exactly a suffix of the answer published so far, that
// suffix is dropped from the continuation; of several such suffixes, the
// longest.
//
// Prefill continuations are never filtered. A provider extending a
// prefilled assistant message continues it, it does not restate it, and a
// continuation that legitimately starts with the same words the answer
// ended with (a refrain, a table row, a repeated phrase) must reach the
// client whole: the heuristic cannot tell such text from a repeat, and
// losing a paid-for token is worse than showing one twice.
//
//   - Only a suffix of at least minOverlapRunes runes counts. Shorter
//     coincidences are common in legitimate text (" the", "| --- "), and
//     stripping a legitimate word is worse than showing a repeated one.
//   - Only the last overlapWindow bytes of the answer are compared, which
//     bounds the text held back at a seam and the work per delta.
//   - The match is exact, byte for byte; a repeat with other whitespace or
//     wording is kept.
//
// To decide, the start of the continuation is held back only while it
// still agrees with the start of some candidate suffix longer than it; a
// continuation that does not repeat is usually released at its first
// delta.
const (
	minOverlapRunes = 8
	overlapWindow   = 512
)

// overlapFilter strips a repeat of the published text from the start of
// a continuation. A nil *overlapFilter passes everything through.
type overlapFilter struct {
	tail string // the end of the published text, from a rune boundary
	// starts are the offsets in tail, ascending, where a suffix of at
	// least minOverlapRunes runes starts on a rune boundary.
	starts []int
	held   string // continuation text not yet released
	done   bool   // decided: everything passes through from now on
	// stripped is the length in bytes of the repeat that was dropped.
	stripped int
}

// newOverlapFilter returns a filter for a continuation of published.
func newOverlapFilter(published string) *overlapFilter {
	tail := published
	if len(tail) > overlapWindow {
		tail = tail[len(tail)-overlapWindow:]
		for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
			tail = tail[1:]
		}
	}
	f := &overlapFilter{tail: tail}
	runes := utf8.RuneCountInString(tail)
	for i := range tail {
		if runes < minOverlapRunes {
			break
		}
		f.starts = append(f.starts, i)
		runes--
	}
	f.done = len(f.starts) == 0
	return f
}

// feed takes the next text of the continuation and returns what may be
// published now.
func (f *overlapFilter) feed(s string) string {
	if f == nil || f.done {
		return s
	}
	f.held += s
	if f.undecided() {
		return ""
	}
	return f.decide()
}

// holding reports whether the filter holds text back, which the next
// text it releases will include.
func (f *overlapFilter) holding() bool { return f != nil && f.held != "" }

// flush decides with what was held and returns it, stripped; for the end of
// the stream, and before a tool call, which must follow its text.
func (f *overlapFilter) flush() string {
	if f == nil || f.done {
		return ""
	}
	return f.decide()
}

// undecided reports whether a candidate suffix longer than the held text
// starts with it, so that a longer repeat may still be coming.
func (f *overlapFilter) undecided() bool {
	for _, i := range f.starts {
		if suffix := f.tail[i:]; len(suffix) > len(f.held) && strings.HasPrefix(suffix, f.held) {
			return true
		}
	}
	return false
}

// decide drops the longest candidate suffix the held text starts with and
// releases the rest.
func (f *overlapFilter) decide() string {
	f.done = true
	out := f.held
	f.held = ""
	for _, i := range f.starts {
		if suffix := f.tail[i:]; strings.HasPrefix(out, suffix) {
			f.stripped = len(suffix)
			return out[len(suffix):]
		}
	}
	return out
}

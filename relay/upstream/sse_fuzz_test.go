package upstream

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzEventReader checks that the parser never panics, that what it returns
// does not depend on how the input is split into reads, and that no event
// carries a line terminator where none can be.
func FuzzEventReader(f *testing.F) {
	for _, tc := range sseCases {
		f.Add([]byte(tc.in), []byte{1, 2, 3}, uint16(0))
	}
	f.Add([]byte("data: a\r\ndata: b\r\n\r\n"), []byte{7}, uint16(0))
	f.Add([]byte("data: 世界\r\r: x\r\n"), []byte{7, 0, 1}, uint16(9))
	f.Add([]byte("data: 12\ndata: 34\n\n"), []byte{3}, uint16(8))

	f.Fuzz(func(t *testing.T, in, splits []byte, limit uint16) {
		max := int(limit % 300) // 0 is the default limit
		want, wantErr := readEvents(bytes.NewReader(in), max)

		sizes := make([]int, len(splits))
		for i, b := range splits {
			sizes[i] = int(b) + 1
		}
		got, gotErr := readEvents(&splitReader{data: bytes.Clone(in), sizes: sizes}, max)

		if g, w := formatEvents(got), formatEvents(want); g != w {
			t.Fatalf("split reads changed events\n got %s\nwant %s", g, w)
		}
		if errKind(gotErr) != errKind(wantErr) {
			t.Fatalf("split reads changed the error: %v, want %v", gotErr, wantErr)
		}
		for _, ev := range want {
			if bytes.ContainsRune(ev.Data, '\r') || (ev.Comment && bytes.ContainsRune(ev.Data, '\n')) {
				t.Fatalf("line terminator in %q", ev.Data)
			}
			if bytes.ContainsAny([]byte(ev.ID), "\x00\r\n") || bytes.ContainsAny([]byte(ev.Event), "\r\n") {
				t.Fatalf("bad id %q or event %q", ev.ID, ev.Event)
			}
			if max > 0 && len(ev.Data) > max {
				t.Fatalf("event of %d bytes passed limit %d", len(ev.Data), max)
			}
		}
	})
}

// errKind reduces a reader error to what must not depend on read splits.
func errKind(err error) string {
	switch {
	case err == io.EOF:
		return "EOF"
	case err == io.ErrUnexpectedEOF:
		return "unexpected EOF"
	case errors.Is(err, ErrEventTooLarge):
		return "too large"
	}
	return "other: " + err.Error()
}

package upstream

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// sseCase is one input with the events and the final error it must give.
type sseCase struct {
	name string
	in   string
	want []Event
	err  error
}

func data(s string) Event { return Event{Data: []byte(s)} }

func comment(s string) Event { return Event{Data: []byte(s), Comment: true} }

var sseCases = []sseCase{
	{name: "empty", in: "", err: io.EOF},
	{name: "blank lines only", in: "\n\r\n\r", err: io.EOF},
	{name: "LF", in: "data: hello\n\n", want: []Event{data("hello")}, err: io.EOF},
	{name: "CRLF", in: "data: hello\r\n\r\n", want: []Event{data("hello")}, err: io.EOF},
	{name: "CR", in: "data: a\r\rdata: b\r\r", want: []Event{data("a"), data("b")}, err: io.EOF},
	{name: "mixed endings", in: "data: a\r\ndata: b\ndata: c\r\r\n", want: []Event{data("a\nb\nc")}, err: io.EOF},
	{name: "CR then LF is one ending", in: "data: a\r\n\r\ndata: b\r\n\r\n", want: []Event{data("a"), data("b")}, err: io.EOF},
	{name: "multi-line data", in: "data: {\"a\":\ndata: 1}\n\n", want: []Event{data("{\"a\":\n1}")}, err: io.EOF},
	{name: "one space stripped", in: "data:  two\n\ndata:none\n\n", want: []Event{data(" two"), data("none")}, err: io.EOF},
	{name: "colon in value", in: "data: a:b: c\n\n", want: []Event{data("a:b: c")}, err: io.EOF},
	{name: "data without colon", in: "data\n\n", want: []Event{data("")}, err: io.EOF},
	{name: "empty data lines", in: "data\ndata\n\n", want: []Event{data("\n")}, err: io.EOF},
	{name: "data with empty value", in: "data: \n\n", want: []Event{data("")}, err: io.EOF},
	{name: "comment", in: ": keep-alive\n\n", want: []Event{comment(" keep-alive")}, err: io.EOF},
	{name: "bare colon", in: ":\r\n", want: []Event{comment("")}, err: io.EOF},
	{
		name: "comment inside event",
		in:   "data: a\n:ping\ndata: b\n\n",
		want: []Event{comment("ping"), data("a\nb")},
		err:  io.EOF,
	},
	{
		name: "event and id",
		in:   "event: delta\nid: 7\ndata: x\n\ndata: y\n\n",
		want: []Event{{Data: []byte("x"), Event: "delta", ID: "7"}, {Data: []byte("y"), ID: "7"}},
		err:  io.EOF,
	},
	{
		name: "id with NUL ignored",
		in:   "id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n",
		want: []Event{{Data: []byte("a"), ID: "1"}, {Data: []byte("b"), ID: "1"}},
		err:  io.EOF,
	},
	{
		name: "empty id resets",
		in:   "id: 1\ndata: a\n\nid\ndata: b\n\n",
		want: []Event{{Data: []byte("a"), ID: "1"}, data("b")},
		err:  io.EOF,
	},
	{
		name: "event without data is dropped",
		in:   "event: ping\n\ndata: x\n\n",
		want: []Event{data("x")},
		err:  io.EOF,
	},
	{
		name: "id of dropped event still counts",
		in:   "id: 5\n\ndata: x\n\n",
		want: []Event{{Data: []byte("x"), ID: "5"}},
		err:  io.EOF,
	},
	{name: "unknown fields ignored", in: "retry: 10\nfoo: bar\n data: x\ndata: a\n\n", want: []Event{data("a")}, err: io.EOF},
	{name: "field names are case-sensitive", in: "Data: x\ndata: a\n\n", want: []Event{data("a")}, err: io.EOF},
	{name: "multi-byte UTF-8", in: "data: héllo, 世界 🚀\n\n", want: []Event{data("héllo, 世界 🚀")}, err: io.EOF},
	{name: "invalid UTF-8 passes through", in: "data: \xff\xfe\n\n", want: []Event{data("\xff\xfe")}, err: io.EOF},
	{name: "leading BOM stripped", in: "\xEF\xBB\xBFdata: a\n\n", want: []Event{data("a")}, err: io.EOF},
	{name: "later BOM kept", in: "data: a\n\n\xEF\xBB\xBFdata: b\n\n", want: []Event{data("a")}, err: io.EOF},
	{name: "event without blank line", in: "data: a\n\ndata: b\n", want: []Event{data("a")}, err: io.ErrUnexpectedEOF},
	{name: "line without ending", in: "data: a", err: io.ErrUnexpectedEOF},
	{name: "comment without ending", in: "data: a\n\n: ping", want: []Event{data("a")}, err: io.ErrUnexpectedEOF},
	{name: "CR at end", in: "data: a\r\r", want: []Event{data("a")}, err: io.EOF},
	{name: "done", in: "data: {}\n\ndata: [DONE]\n\n", want: []Event{data("{}"), data("[DONE]")}, err: io.EOF},
}

// readEvents reads r to the end with the given limit.
func readEvents(r io.Reader, max int) ([]Event, error) {
	er := NewEventReader(r, max)
	var evs []Event
	for {
		ev, err := er.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// splitReader returns data in reads of the given sizes, cycling through
// them; it is how tests and the fuzzer choose where reads split.
type splitReader struct {
	data  []byte
	sizes []int
	i     int
}

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, io.EOF
	}
	n := len(s.data)
	if len(s.sizes) > 0 {
		n = min(n, s.sizes[s.i%len(s.sizes)])
		s.i++
	}
	n = copy(p, s.data[:n])
	s.data = s.data[n:]
	return n, nil
}

func formatEvents(evs []Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "{comment=%v event=%q id=%q data=%q} ", ev.Comment, ev.Event, ev.ID, ev.Data)
	}
	return b.String()
}

func checkEvents(t *testing.T, how string, got []Event, gotErr error, want []Event, wantErr error) {
	t.Helper()
	if g, w := formatEvents(got), formatEvents(want); g != w {
		t.Errorf("%s: events\n got %s\nwant %s", how, g, w)
	}
	if !errors.Is(gotErr, wantErr) {
		t.Errorf("%s: error = %v, want %v", how, gotErr, wantErr)
	}
}

func TestEventReader(t *testing.T) {
	for _, tc := range sseCases {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := readEvents(strings.NewReader(tc.in), 0)
			checkEvents(t, "whole", evs, err, tc.want, tc.err)

			evs, err = readEvents(iotest.OneByteReader(strings.NewReader(tc.in)), 0)
			checkEvents(t, "one byte", evs, err, tc.want, tc.err)

			evs, err = readEvents(iotest.DataErrReader(strings.NewReader(tc.in)), 0)
			checkEvents(t, "data with EOF", evs, err, tc.want, tc.err)

			for i := 1; i < len(tc.in); i++ {
				evs, err = readEvents(&splitReader{data: []byte(tc.in), sizes: []int{i, len(tc.in)}}, 0)
				checkEvents(t, fmt.Sprintf("split at %d", i), evs, err, tc.want, tc.err)
			}
		})
	}
}

func TestEventReaderLimit(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want []Event
		err  error
	}{
		{name: "line at limit", in: "data: 12\n\n", max: 8, want: []Event{data("12")}, err: io.EOF},
		{name: "line over limit", in: "data: 123\n\n", max: 8, err: ErrEventTooLarge},
		{name: "unterminated line over limit", in: "data: 123", max: 8, err: ErrEventTooLarge},
		{name: "comment over limit", in: ": 12345678\n", max: 8, err: ErrEventTooLarge},
		// Each data line costs its value and a newline.
		{name: "data at limit", in: "data: 1\ndata: 2\ndata: 3\ndata: 4\n\n", max: 8, want: []Event{data("1\n2\n3\n4")}, err: io.EOF},
		{name: "data over limit", in: "data: 1\ndata: 2\ndata: 3\ndata: 4\n\n", max: 7, err: ErrEventTooLarge},
		{
			name: "limit is per event",
			in:   "data: 1234\n\ndata: 1234\n\n",
			max:  10,
			want: []Event{data("1234"), data("1234")},
			err:  io.EOF,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := readEvents(strings.NewReader(tc.in), tc.max)
			checkEvents(t, "whole", evs, err, tc.want, tc.err)
			evs, err = readEvents(iotest.OneByteReader(strings.NewReader(tc.in)), tc.max)
			checkEvents(t, "one byte", evs, err, tc.want, tc.err)
			if tc.err == ErrEventTooLarge && !errors.Is(err, ErrMalformed) {
				t.Errorf("error %v does not wrap ErrMalformed", err)
			}
		})
	}
}

func TestEventReaderDefaultLimit(t *testing.T) {
	big := strings.Repeat("x", DefaultMaxEventSize-len("data: "))
	evs, err := readEvents(strings.NewReader("data: "+big+"\n\n"), 0)
	checkEvents(t, "at default", evs, err, []Event{data(big)}, io.EOF)

	_, err = readEvents(strings.NewReader("data: "+big+"x\n\n"), 0)
	wantErr(t, err, ErrEventTooLarge)
}

// A bare CR ends a line at once: the event is dispatched without waiting
// for a byte that would tell whether an LF follows.
func TestEventReaderCRDoesNotWait(t *testing.T) {
	pr, pw := io.Pipe()
	defer pr.Close()
	go func() {
		_, _ = io.WriteString(pw, "data: a\r\r")
		// The next write only completes once the reader asks for more.
		_, _ = io.WriteString(pw, "\ndata: b\r\n\r\n")
		_ = pw.Close()
	}()
	er := NewEventReader(pr, 0)
	for _, want := range []string{"a", "b"} {
		ev, err := er.Next()
		if err != nil || string(ev.Data) != want {
			t.Fatalf("Next = %q, %v; want %q", ev.Data, err, want)
		}
	}
	if _, err := er.Next(); err != io.EOF {
		t.Fatalf("Next at end = %v, want io.EOF", err)
	}
}

func TestEventReaderErrorsAreSticky(t *testing.T) {
	boom := errors.New("boom")
	er := NewEventReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)), 0)
	if ev, err := er.Next(); err != nil || string(ev.Data) != "a" {
		t.Fatalf("Next = %q, %v; want a", ev.Data, err)
	}
	for range 2 {
		if _, err := er.Next(); !errors.Is(err, boom) {
			t.Fatalf("Next = %v, want %v", err, boom)
		}
	}
}

// The returned Data must not change when the reader reuses its buffers.
func TestEventReaderDataIsOwned(t *testing.T) {
	er := NewEventReader(strings.NewReader("data: first\n\n: c1\ndata: second\n\n: c2\n"), 0)
	var evs []Event
	for {
		ev, err := er.Next()
		if err != nil {
			break
		}
		evs = append(evs, ev)
	}
	want := []Event{data("first"), comment(" c1"), data("second"), comment(" c2")}
	if g, w := formatEvents(evs), formatEvents(want); g != w {
		t.Fatalf("events\n got %s\nwant %s", g, w)
	}
}

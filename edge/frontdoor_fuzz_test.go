package edge

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/wire"
)

// FuzzResumeToken: tokens come from URLs anyone can write. Nothing panics,
// and the only token accepted is one the edge issued, for its stream.
func FuzzResumeToken(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	tokens := &resumeTokens{secret: []byte(tokenSecret), ttl: time.Hour, now: func() time.Time { return now }}
	id := "sabcdefghijklmnopqrstuvwxyz"
	valid := tokens.issue(id, "acme")
	for _, s := range []string{valid, tokens.issue(id, ""), tokens.issue("s"+id[1:26]+"a", "acme"), "", "v1", "v1...", "v1.YWNtZQ.1.x", valid + "=", valid[:len(valid)-1]} {
		f.Add(s, id)
	}
	f.Add(valid, "sother")
	f.Fuzz(func(t *testing.T, token, stream string) {
		tenant, ok := tokens.verify(token, stream)
		if !ok {
			if tenant != "" {
				t.Fatalf("refused %q but named tenant %q", token, tenant)
			}
			return
		}
		if stream != id || (token != valid || tenant != "acme") && token != tokens.issue(id, "") {
			t.Fatalf("accepted %q for %q as tenant %q", token, stream, tenant)
		}
	})
}

// FuzzWSMessage: a WebSocket message is decoded, or the connection is
// closed with 1003; what decodes has a known type, and its request, key,
// stream id and cursor are checked like the HTTP API's.
func FuzzWSMessage(f *testing.F) {
	for _, s := range []string{
		`{"type":"start","request":{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]},"idempotency_key":"k"}`,
		`{"type":"resume","stream_id":"sabcdefghijklmnopqrstuvwxyz","after":"3-9"}`,
		`{"type":"cancel","stream_id":"x"}`,
		`{"type":"dance"}`, `{"type":5}`, `{"type":"resume","stream_id":5}`, `[]`, `null`, `nope`, `{"type":"start","request":"x"}`,
	} {
		f.Add([]byte(s))
	}
	lim := limits{served: func(m string) bool { return m == testModel }, maxMessages: 4, maxTokens: 100}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, ce := decodeWSMessage(data)
		if ce != nil {
			if ce.code != 1003 || ce.reason == "" || len(ce.reason) > 123 {
				t.Fatalf("close %+v", ce)
			}
			return
		}
		if !wsTypes[in.Type] || !json.Valid(data) {
			t.Fatalf("decoded %q as %+v", data, in)
		}
		switch in.Type {
		case "start":
			if e := checkIdempotencyKey(in.IdempotencyKey, "idempotency_key"); e != nil && e.Status != http.StatusBadRequest {
				t.Fatalf("key error %+v", e)
			}
			if _, e := parseChatRequest(in.Request, lim); e != nil && e.Status != http.StatusBadRequest {
				t.Fatalf("request error %+v", e)
			}
		default:
			checkResume(t, in.StreamID, in.After)
		}
	})
}

// TestStreamCursorSources: GET /v1/streams/{id} takes its cursor from the
// Last-Event-ID header, else the last_event_id query parameter. Either is
// refused with a 400 naming it, or parsed into a cursor that renders back
// to itself, before anything reaches NATS. (wire.FuzzStreamCursor fuzzes
// the parsing: fuzzed here, in a test binary that links a nats-server,
// it managed a few hundred executions a second.)
func TestStreamCursorSources(t *testing.T) {
	const id = "sabcdefghijklmnopqrstuvwxyz"
	for _, tc := range []struct {
		header, query, id string
		param             string
		refused           bool
	}{
		{"", "", id, "last_event_id", false},
		{"3-9", "", id, "Last-Event-ID", false},
		{"", "3-9", id, "last_event_id", false},
		{"3-9", "garbage", id, "Last-Event-ID", false},
		{"garbage", "3-9", id, "Last-Event-ID", true},
		{"", "0-1", id, "last_event_id", true},
		{"1-", "", id, "Last-Event-ID", true},
		{"-1-2", "", id, "Last-Event-ID", true},
		{"18446744073709551616-1", "", id, "Last-Event-ID", true},
		{"3-9", "", "sabc", "Last-Event-ID", true},
		{fixedCursorKey.String(wire.Cursor{Seq: 3, JSSeq: 9}), "", id, "Last-Event-ID", false},
		{"", fixedCursorKey.String(wire.Cursor{Seq: 3, JSSeq: 9}), id, "last_event_id", false},
		{"AAAAAAAAAAAAAAAAAAAAAA", "", id, "Last-Event-ID", true},
	} {
		r := &http.Request{Header: http.Header{}, URL: &url.URL{RawQuery: url.Values{"last_event_id": {tc.query}}.Encode()}}
		if tc.header != "" {
			r.Header["Last-Event-Id"] = []string{tc.header}
		}
		cursor, param := requestCursor(r)
		if want := cmp.Or(tc.header, tc.query); cursor != want || param != tc.param {
			t.Errorf("%+v: %q from %s", tc, cursor, param)
		}
		checkResume(t, tc.id, cursor)
		if _, e := parseResume(fixedCursorKey, tc.id, "id", cursor, param); (e != nil) != tc.refused || e != nil && e.Param != param && e.Param != "id" {
			t.Errorf("%+v: %+v", tc, e)
		}
	}
}

const fixedCursorSecret = "0123456789abcdef"

// fixedCursorKey stands for a cluster's cursor key in tests without one.
var fixedCursorKey = func() *wire.CursorKey {
	k, err := wire.NewCursorKey([]byte(fixedCursorSecret))
	if err != nil {
		panic(err)
	}
	return k
}()

func checkResume(t *testing.T, id, cursor string) {
	t.Helper()
	c, e := parseResume(fixedCursorKey, id, "stream_id", cursor, "after")
	if e != nil {
		if e.Status != http.StatusBadRequest || (e.Param != "stream_id" && e.Param != "after") || e.Message == "" {
			t.Fatalf("error %+v", e)
		}
		return
	}
	if !wire.ValidStreamID(id) {
		t.Fatalf("accepted stream id %q", id)
	}
	if cursor == "" {
		if !c.IsZero() {
			t.Fatalf("empty cursor parsed as %v", c)
		}
		return
	}
	if c.Seq == 0 || c.JSSeq == 0 {
		t.Fatalf("cursor %q parsed as %v", cursor, c)
	}
	if c.Seq >= 1<<40 || c.JSSeq >= 1<<56 {
		return // wider than a sealed cursor holds: only the plain form names it
	}
	if back, err := fixedCursorKey.Parse(fixedCursorKey.String(c)); err != nil || back != c {
		t.Fatalf("cursor %q parsed as %v", cursor, c)
	}
}

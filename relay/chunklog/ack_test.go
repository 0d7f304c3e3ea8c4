package chunklog

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/relaydev/relay/relay/natsserver"
	"github.com/relaydev/relay/relay/relaytest"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// serverReplies are a real server's replies to publishes: the ones a
// writer gets (stored, wrong last sequence) and a few it does not, from a
// server with a JetStream domain (which acks name) and one without.
func serverReplies(t testing.TB) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, domain := range []string{"", "d"} {
		s, err := natsserver.Start(natsserver.Config{StoreDir: t.TempDir(), Domain: domain})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		nc, _ := relaytest.Connect(t, s, streams.Topology{})
		subject := wire.ChunkSubject(wire.NewStreamID())
		ask := func(name string, h nats.Header) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			reply, err := nc.RequestMsgWithContext(ctx, &nats.Msg{Subject: subject, Header: h, Data: []byte("frame")})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[name+"/domain="+domain] = reply.Data
		}
		ask("stored", nats.Header{jetstream.ExpectedLastSubjSeqHeader: {"0"}})
		ask("wrong last subject sequence", nats.Header{jetstream.ExpectedLastSubjSeqHeader: {"0"}})
		ask("wrong last sequence", nats.Header{jetstream.ExpectedLastSeqHeader: {"99"}})
		ask("wrong stream", nats.Header{jetstream.ExpectedStreamHeader: {"OTHER"}})
		ask("with id", nats.Header{jetstream.MsgIDHeader: {"x"}})
		ask("duplicate", nats.Header{jetstream.MsgIDHeader: {"x"}})
	}
	return out
}

// Every reply the server sends a writer takes the hand path, and means
// what encoding/json makes of it.
func TestScanAckReadsServerReplies(t *testing.T) {
	for name, reply := range serverReplies(t) {
		got, ok := scanAck(reply)
		var want pubAck
		if err := json.Unmarshal(reply, &want); err != nil {
			t.Fatalf("%s: %s: %v", name, reply, err)
		}
		if !ok || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: scanAck(%s) = %+v, %v; want %+v", name, reply, got, ok, want)
		}
	}
}

func TestPubAckResult(t *testing.T) {
	for _, tc := range []struct {
		reply string
		seq   uint64
		want  error
	}{
		{`{"stream":"RELAY_CHUNKS","seq":7}`, 7, nil},
		{`{"stream":"RELAY_CHUNKS","seq":7,"val":"1"}`, 7, nil},
		{`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"RELAY_CHUNKS","seq":0}`, 0, &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}},
		{`{"error":{"code":404,"err_code":10059,"description":"stream not found"}}`, 0, jetstream.ErrStreamNotFound},
		{`{"seq":7}`, 0, jetstream.ErrInvalidJSAck},
		{`null`, 0, jetstream.ErrInvalidJSAck},
	} {
		a, err := parseAck([]byte(tc.reply))
		if err != nil {
			t.Fatalf("parseAck(%s): %v", tc.reply, err)
		}
		seq, err := a.result()
		if seq != tc.seq || (tc.want == nil) != (err == nil) || !errors.Is(err, tc.want) {
			t.Errorf("%s: result = %d, %v; want %d, %v", tc.reply, seq, err, tc.seq, tc.want)
		}
	}
	if _, err := parseAck([]byte(`{"stream":`)); err == nil {
		t.Error("parseAck of a truncated reply: no error")
	}
}

// FuzzScanAck checks that scanAck reads nothing differently from
// encoding/json: what it accepts, json accepts and decodes the same way.
// What it refuses goes to json anyway.
func FuzzScanAck(f *testing.F) {
	for _, reply := range serverReplies(f) {
		f.Add(reply)
	}
	for _, s := range []string{
		`{"stream":"RELAY_CHUNKS","seq":18446744073709551615}`,
		`{"stream":"RELAY_CHUNKS","seq":18446744073709551616}`,
		`{"error":{"code":-1,"err_code":65536}}`,
		` { "stream" : "S" , "seq" : 0 , "duplicate" : false } `,
		`{"Stream":"S","seq":01}`,
		`{"stream":"S\u0041","seq":1e3}`,
		`{"stream":"S","stream":"T","error":null}`,
		`{"stream":"RELAY_CHUNKS","seq":42,"batch":"k3J9xQ2a1z","count":40}`,
		`{"stream":"RELAY_CHUNKS","seq":42,"batch":"b","count":2147483648}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := scanAck(data)
		var want pubAck
		err := json.Unmarshal(data, &want)
		switch {
		case ok && err != nil:
			t.Fatalf("scanAck accepted %q, json: %v", data, err)
		case ok && !reflect.DeepEqual(got, want):
			t.Fatalf("scanAck(%q) = %+v, json %+v", data, got, want)
		}
		parsed, perr := parseAck(data)
		if (perr == nil) != (err == nil) || err == nil && !reflect.DeepEqual(parsed, want) {
			t.Fatalf("parseAck(%q) = %+v, %v; json %+v, %v", data, parsed, perr, want, err)
		}
	})
}

// BenchmarkParseAck compares reading a stored chunk's ack by hand and with
// encoding/json.
func BenchmarkParseAck(b *testing.B) {
	ack := []byte(`{"stream":"RELAY_CHUNKS","seq":1234567}`)
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if a, ok := scanAck(ack); !ok || a.Seq != 1234567 {
				b.Fatal(a, ok)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var a pubAck
			if err := json.Unmarshal(ack, &a); err != nil || a.Seq != 1234567 {
				b.Fatal(a, err)
			}
		}
	})
}

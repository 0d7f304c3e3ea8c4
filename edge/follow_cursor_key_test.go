package edge

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/relaydev/relay/relay/chunklog"
	"github.com/relaydev/relay/relay/wire"
)

// twoTenants are the API keys of tenants alpha and beta.
var twoTenants = []APIKey{{Tenant: "alpha", KeySHA256: keyHash("key-alpha")}, {Tenant: "beta", KeySHA256: keyHash("key-beta")}}

// writeInterleaved writes alpha's and beta's streams into the one
// partition they share, alpha's frames between each two of beta's: i of
// them after beta's i-th. It returns where each of beta's frames is
// stored.
func (e *env) writeInterleaved(alpha, beta string, betaFrames []wire.Frame) []wire.Cursor {
	e.t.Helper()
	ctx := context.Background()
	kv, err := e.js.KeyValue(ctx, wire.MetaBucket)
	if err != nil {
		e.t.Fatal(err)
	}
	writers := map[string]*chunklog.Writer{}
	for _, s := range []struct{ id, tenant string }{{alpha, "alpha"}, {beta, "beta"}} {
		if _, err := kv.Create(ctx, s.id, mustJSON(e.t, wire.Meta{Tenant: s.tenant, Model: testModel, Created: 1})); err != nil {
			e.t.Fatal(err)
		}
		writers[s.id] = chunklog.NewWriter(e.js, chunklog.NewReader(e.nc, ""), s.id, 0, 0)
		if _, err := writers[s.id].Append(ctx, wire.Frame{Kind: wire.KindClaim, Worker: "test"}); err != nil {
			e.t.Fatal(err)
		}
	}
	var cursors []wire.Cursor
	for i, f := range betaFrames {
		c, err := writers[beta].Append(ctx, f)
		if err != nil {
			e.t.Fatal(err)
		}
		cursors = append(cursors, c)
		for range i + 1 {
			if _, err := writers[alpha].Append(ctx, wire.Frame{Kind: wire.KindChunk, Content: "a", Provider: "alpha", Model: testModel, Attempt: 1}); err != nil {
				e.t.Fatal(err)
			}
		}
	}
	return cursors
}

// TestCursorsRevealNoOtherStream: beta's stream shares its partition with
// alpha's, whose frames are stored between each two of beta's. Every
// cursor beta's client sees (the SSE ids and the relay objects' cursors)
// is 22 characters of base64url that is not the plain "<seq>-<jsseq>",
// and contains neither the decimal JetStream sequence of its frame nor
// the number of alpha's frames before it: nothing of alpha's traffic can
// be counted from them. The key is fixed: a random one would, now and
// then, seal a cursor whose characters spell one of those numbers by
// chance.
func TestCursorsRevealNoOtherStream(t *testing.T) {
	e := newEnv(t)
	e.fixCursorKey()
	edge := e.startEdge(Config{APIKeys: twoTenants})
	alpha, beta := wire.NewStreamID(), wire.NewStreamID()
	if wire.ChunkStreamOf(alpha) != wire.ChunkStreamOf(beta) {
		t.Fatalf("streams %s and %s are in different partitions", alpha, beta)
	}
	stored := e.writeInterleaved(alpha, beta, answer(6)(wire.Request{}))
	body := readAll(t, do(t, "GET", edge.url+"/v1/streams/"+beta, "", http.Header{"Authorization": {"Bearer key-beta"}}))
	frames := frameEvents(parseSSE(t, body))
	if len(frames) != len(stored) {
		t.Fatalf("%d frame events, want %d:\n%s", len(frames), len(stored), body)
	}
	sealed := regexp.MustCompile(`^[A-Za-z0-9_-]{22}$`)
	plain := regexp.MustCompile(`^[0-9]+-[0-9]+$`)
	alphaBefore := 0
	for i, ev := range frames {
		relayCursor := decodeChunk(t, ev.Data).Relay.Cursor
		for _, c := range []string{ev.ID, relayCursor} {
			if !sealed.MatchString(c) || plain.MatchString(c) {
				t.Fatalf("frame %d of beta: cursor %q is not opaque", i+1, c)
			}
			for _, n := range []uint64{stored[i].JSSeq, uint64(alphaBefore)} {
				if n >= 10 && strings.Contains(c, strconv.FormatUint(n, 10)) {
					t.Fatalf("frame %d of beta: cursor %q shows %d", i+1, c, n)
				}
			}
		}
		alphaBefore += i + 1
	}
}

// TestCursorAcrossEdges: a cursor one edge showed resumes the stream on
// another edge of the cluster, with no secret configured, exactly after
// its frame; and so does a cursor of the plain form edges showed before
// cursors were sealed, which a client may hold across an upgrade.
func TestCursorAcrossEdges(t *testing.T) {
	e := newEnv(t)
	first, second := e.startEdge(Config{}), e.startEdge(Config{})
	id := wire.NewStreamID()
	stored := e.writeStream(id, wire.Meta{Model: testModel, Created: 1}, answer(8)(wire.Request{}))
	full := frameEvents(parseSSE(t, readAll(t, do(t, "GET", first.url+"/v1/streams/"+id, "", nil))))
	if len(full) != 9 {
		t.Fatalf("%d frames from the first edge", len(full))
	}
	for name, cursor := range map[string]string{
		"sealed by the first edge": full[3].ID,
		"plain":                    fmt.Sprintf("%d-%d", stored[3].Seq, stored[3].JSSeq),
	} {
		t.Run(name, func(t *testing.T) {
			for param, res := range map[string]*http.Response{
				"Last-Event-ID": do(t, "GET", second.url+"/v1/streams/"+id, "", http.Header{"Last-Event-Id": {cursor}}),
				"last_event_id": do(t, "GET", second.url+"/v1/streams/"+id+"?last_event_id="+cursor, "", nil),
			} {
				rest := frameEvents(parseSSE(t, readAll(t, res)))
				if len(rest) != 5 {
					t.Fatalf("%s: %d frames after the 4th of 9", param, len(rest))
				}
				for i, ev := range rest {
					if ev != full[4+i] {
						t.Fatalf("%s: frame %d from the second edge differs:\n%+v\n%+v", param, 5+i, ev, full[4+i])
					}
				}
			}
		})
	}
}

// TestCursorForgedRefused: a cursor altered in any one character, or
// sealed with a key not the cluster's, is a 400 invalid_cursor naming
// its parameter; none positions the read anywhere.
func TestCursorForgedRefused(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	id := wire.NewStreamID()
	stored := e.writeStream(id, wire.Meta{Model: testModel, Created: 1}, answer(3)(wire.Request{}))
	good := e.seal(stored[1])
	forged := []string{fixedCursorKey.String(stored[1])}
	for i := range good {
		for _, r := range "AgQw-_" {
			if altered := good[:i] + string(r) + good[i+1:]; altered != good {
				forged = append(forged, altered)
			}
		}
	}
	for _, cursor := range forged {
		res := do(t, "GET", edge.url+"/v1/streams/"+id, "", http.Header{"Last-Event-Id": {cursor}})
		body := readAll(t, res)
		want := fmt.Sprintf(`{"error":{"message":"malformed cursor \"%s\": not a cursor of this relay","type":"invalid_request_error","param":"Last-Event-ID","code":"invalid_cursor"}}`, cursor)
		if res.StatusCode != http.StatusBadRequest || strings.TrimSpace(body) != want {
			t.Fatalf("cursor %q (altered from %q): %d %s", cursor, good, res.StatusCode, body)
		}
	}
}

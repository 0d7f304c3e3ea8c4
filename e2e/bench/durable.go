package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// durable measures the Durable Streams path (/ds on the edge) as resume
// is measured for the relay's own streams: from a read at an offset, on a
// new TCP connection, to the first replayed byte (catch-up GET) or data
// event (live=sse), in a stream of durableMessages appended while other
// streams were; baseline, the same edge's resume of a generation of as
// many chunks with Last-Event-ID. Then the edge's memory per open
// live=sse reader (durable_memory.go).
func (b *bench) durable(ctx context.Context) ([]figure, error) {
	p := b.plan
	long := mockSpec{model: "long", tokens: p.durableMessages, interval: 5 * time.Millisecond}
	other := mockSpec{model: "other", tokens: otherMessages, interval: time.Duration(long.tokens) * long.interval / otherMessages}
	held := mockSpec{model: "held", tokens: 2, interval: time.Minute}
	sys, err := b.startSystem(ctx, systemSpec{
		name: "durable", mocks: []mockSpec{long, other, held}, workers: 2, maxInflight: p.durableReaders/2 + p.durableOthers + 64,
	})
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	hc := newHTTPClient(p.durableOthers+1, true)
	defer hc.CloseIdleConnections()
	ds := dsClient{hc: hc, base: sys.edge.URL + "/ds/bench"}

	stream := "read"
	offsets, othersWritten, err := ds.writeInterleaved(ctx, stream, p.durableMessages, p.durableOthers)
	if err != nil {
		return nil, err
	}
	b.log.printf("  durable: %d messages appended beside %d other streams (%d appends to them)", p.durableMessages, p.durableOthers, othersWritten)
	dial := dsClient{hc: newHTTPClient(1, false), base: ds.base}
	// By how much of the stream is left to read: the first and the last
	// fifth of offsets.
	var catchUp, sse, early, late []time.Duration
	for range p.durableSamples {
		k := rand.IntN(len(offsets) - 1)
		d, err := dial.firstCatchUp(ctx, stream, offsets[k], dsMessage(k+1))
		if err != nil {
			return nil, err
		}
		catchUp = append(catchUp, d)
		switch {
		case k < len(offsets)/5:
			early = append(early, d)
		case k >= len(offsets)*4/5:
			late = append(late, d)
		}
		if d, err = dial.firstSSE(ctx, stream, offsets[k], dsMessage(k+1)); err != nil {
			return nil, err
		}
		sse = append(sse, d)
	}

	resumed, err := b.resumeGeneration(ctx, sys, hc, long, other, p.durableOthers, p.durableSamples)
	if err != nil {
		return nil, err
	}
	base := ptr(summarize(ms(resumed)))
	note := fmt.Sprintf("catch-up median %.1f ms with ≥ 80 %% of the stream left to read, %.1f ms with ≤ 20 %% (a response is one page of at most 64 appends, read whole before its first byte); %d-message text/plain stream appended one POST at a time while %d other streams got 20 messages each over its length; a read at a random offset of it, new TCP connection per request; baseline: GET /v1/streams/{id} with Last-Event-ID after a random chunk of a %d-chunk generation written beside %d others of 20 tokens each",
		summarize(ms(early)).Median, summarize(ms(late)).Median, p.durableMessages, p.durableOthers, p.durableMessages, p.durableOthers)
	figs := []figure{
		{rank: rankDurable, Name: fmt.Sprintf("Durable Streams: catch-up GET at an offset → first replayed byte (%d-message stream)", p.durableMessages),
			Unit: "ms", Relay: ptr(summarize(ms(catchUp))), Baseline: base, BaselineName: "the relay's resume (Last-Event-ID) → first chunk", Note: note},
		{rank: rankDurable, Name: fmt.Sprintf("Durable Streams: live=sse at an offset → first data event (%d-message stream)", p.durableMessages),
			Unit: "ms", Relay: ptr(summarize(ms(sse))), Baseline: base, BaselineName: "the relay's resume (Last-Event-ID) → first chunk"},
	}
	for i := range figs {
		figs[i].compare()
	}
	mem, err := b.durableMemory(ctx, sys, ds, held)
	return append(figs, mem...), err
}

// resumeGeneration writes a generation of long's chunks beside others
// generations of other, then resumes it samples times after a random
// chunk, each on a new connection, and returns the times to the first
// replayed chunk.
func (b *bench) resumeGeneration(ctx context.Context, sys *system, hc *http.Client, long, other mockSpec, others, samples int) ([]time.Duration, error) {
	url := chatURL(sys.edge.URL)
	var all sync.WaitGroup
	for i := range others {
		conv := newConversation(other.model, fmt.Sprintf("beside a durable read %d", i), other.tokens)
		all.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			runStream(sctx, hc, url, conv, streamOpts{})
		})
	}
	conv := newConversation(long.model, "a generation as long as the durable stream", long.tokens)
	sctx, cancel := context.WithTimeout(ctx, time.Duration(long.tokens)*long.interval+time.Minute)
	target := runStream(sctx, hc, url, conv, streamOpts{ids: true})
	cancel()
	all.Wait()
	if !target.exact(conv.answer) || len(target.IDs) < 2 {
		return nil, fmt.Errorf("the generation was not delivered exactly: %v (%d chunks)", target.Err, len(target.IDs))
	}
	dial := newHTTPClient(1, false)
	out := make([]time.Duration, 0, samples)
	for range samples {
		k := rand.IntN(len(target.IDs) - 1)
		d, err := resumeOnce(ctx, dial, sys.edge.URL+"/v1/streams/"+target.StreamID, target.IDs[k], target.IDs[k+1])
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// otherMessages is what each stream beside the measured one holds: a
// generation's tokens, or a Durable Stream's messages.
const otherMessages = 20

// dsMessage is the i-th message appended to a measured stream: its
// number makes a misplaced read visible.
func dsMessage(i int) string {
	return fmt.Sprintf("message %06d of a durable stream, about as long as a few tokens of an answer\n", i)
}

// dsClient speaks the Durable Streams protocol to the streams below base.
type dsClient struct {
	hc   *http.Client
	base string
}

// create makes a text/plain stream.
func (c dsClient) create(ctx context.Context, name string) error {
	resp, err := c.do(ctx, http.MethodPut, name, "", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT %s: HTTP %d", name, resp.StatusCode)
	}
	return nil
}

// appendMsg appends data and returns the stream's next offset.
func (c dsClient) appendMsg(ctx context.Context, name, data string) (string, error) {
	resp, err := c.do(ctx, http.MethodPost, name, "", strings.NewReader(data))
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	next := resp.Header.Get("Stream-Next-Offset")
	if resp.StatusCode/100 != 2 || next == "" {
		return "", fmt.Errorf("POST %s: HTTP %d, next offset %q", name, resp.StatusCode, next)
	}
	return next, nil
}

func (c dsClient) do(ctx context.Context, method, name, query string, body io.Reader) (*http.Response, error) {
	url := c.base + "/" + name
	if query != "" {
		url += "?" + query
	}
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	if method == http.MethodPut || method == http.MethodPost {
		req.Header.Set("Content-Type", "text/plain")
	}
	return c.hc.Do(req)
}

// writeInterleaved creates stream and appends n messages to it, one at a
// time; after every twentieth of them, each of others other streams gets
// one message, as the generations beside the baseline's each get their
// 20 tokens over its length. It returns the offset before each message
// (offsets[i] reads from message i+1) and how many appends the others
// made.
func (c dsClient) writeInterleaved(ctx context.Context, stream string, n, others int) ([]string, int, error) {
	names := make([]string, others)
	for i := range names {
		names[i] = fmt.Sprintf("%s-beside-%d", stream, i)
	}
	if err := forEach(ctx, append([]string{stream}, names...), 16, c.create); err != nil {
		return nil, 0, err
	}
	every := max(1, n/otherMessages)
	offsets := []string{"-1"}
	written := 0
	for i := 1; i <= n; i++ {
		next, err := c.appendMsg(ctx, stream, dsMessage(i))
		if err != nil {
			return nil, 0, err
		}
		offsets = append(offsets, next)
		if i%every == 0 {
			if err := forEach(ctx, names, 16, func(ctx context.Context, name string) error {
				_, err := c.appendMsg(ctx, name, dsMessage(i/every))
				return err
			}); err != nil {
				return nil, 0, err
			}
			written += others
		}
	}
	return offsets[:n], written, nil
}

// firstCatchUp reads stream from offset and returns the time until the
// first byte of the body, which must begin with want.
func (c dsClient) firstCatchUp(ctx context.Context, stream, offset, want string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := c.do(ctx, http.MethodGet, stream, "offset="+offset, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	first := make([]byte, len(want))
	n, err := io.ReadAtLeast(resp.Body, first, 1)
	d := time.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s at %s: HTTP %d: %v", stream, offset, resp.StatusCode, err)
	}
	if _, err := io.ReadFull(resp.Body, first[n:]); err != nil || string(first) != want {
		return 0, fmt.Errorf("GET %s at %s: body begins %q, want %q (%v)", stream, offset, first, want, err)
	}
	return d, nil
}

// firstSSE opens stream live=sse at offset and returns the time until the
// first data event, which must begin with want.
func (c dsClient) firstSSE(ctx context.Context, stream, offset, want string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := c.do(ctx, http.MethodGet, stream, "offset="+offset+"&live=sse", nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s live=sse at %s: HTTP %d", stream, offset, resp.StatusCode)
	}
	data, err := nextDSData(bufio.NewReaderSize(resp.Body, sseBuffer))
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("GET %s live=sse at %s: %w", stream, offset, err)
	}
	if !strings.HasPrefix(data, strings.TrimSuffix(want, "\n")) {
		return 0, fmt.Errorf("GET %s live=sse at %s: first data %.80q, want %q", stream, offset, data, want)
	}
	return d, nil
}

// nextDSData returns the next data event's data (its lines joined with
// "\n", as SSE defines), skipping control events.
func nextDSData(r *bufio.Reader) (string, error) {
	var event string
	var data []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if event == "data" && data != nil {
				return strings.Join(data, "\n"), nil
			}
			event, data = "", nil
		case strings.HasPrefix(line, "event:"):
			event = strings.TrimSpace(line[len("event:"):])
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(line[len("data:"):], " "))
		}
	}
}

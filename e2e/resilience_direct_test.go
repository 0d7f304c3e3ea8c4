package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaydev/relay/relay/mockupstream"
	"github.com/relaydev/relay/relay/streams"
	"github.com/relaydev/relay/relay/wire"
)

// Never worse than calling the provider directly. A replicated cluster on
// default settings (3 nats-servers, R3, 2 edges, 3 workers, a coordinator)
// and the official openai-go client with its default retries face the same
// fake upstream, in the same weather, and their exact answers are
// compared. The relay's clients also drop their connections and resume on
// either edge; the direct client cannot resume at all.

// weatherTokens is the length of every answer: long enough for cuts and
// stalls to land mid-answer.
const weatherTokens = 40

// ordinaryWeather is a provider's ordinary misbehaviour: 5% of calls cut
// mid-answer, 5% stalled mid-answer for longer than the relay's default
// stall_timeout (a direct client just waits), 3% answered 429 with
// Retry-After: 1.
var ordinaryWeather = mockupstream.Weather{Cut: 0.05, Stall: 0.05, StallFor: 20 * time.Second, RateLimited: 0.03, RetryAfter: time.Second}

func TestProcessNeverWorseThanDirect(t *testing.T) {
	// Default settings, streams.replicas included: three on a cluster.
	s := start(t, options{Processes: true, ClusterNodes: 3, Edges: 2, Workers: 3, Coordinator: true,
		Mock: mockupstream.Config{Tokens: weatherTokens, TokenInterval: 10 * time.Millisecond, Weather: ordinaryWeather},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	js, err := jetstream.New(s.nc)
	must(t, err)
	// And streams.partitions: one chunk stream per replica.
	for _, name := range []string{wire.RequestStream, wire.ChunkStreamName(0), wire.ChunkStreamName(1), wire.ChunkStreamName(2)} {
		st, err := js.Stream(ctx, name)
		must(t, err)
		if r := st.CachedInfo().Config.Replicas; r != 3 {
			t.Fatalf("%s has %d replicas on a three-node cluster with default settings, want 3", name, r)
		}
	}
	if n, err := streams.Partitions(ctx, js); err != nil || n != 3 {
		t.Fatalf("%d partitions (%v) on a three-node cluster with default settings, want 3", n, err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	direct := openai.NewClient(option.WithBaseURL(s.mockURL()+"/v1/"), option.WithAPIKey("direct"))

	// 1. Weather: 200 streams, 50 at a time, each way.
	const streams, parallel = 200, 50
	relayRun := inParallel(streams, parallel, func(i int) error {
		return s.relayStream(ctx, seed, fmt.Sprintf("weather %d", i), true)
	})
	directRun := inParallel(streams, parallel, func(i int) error {
		return directStream(ctx, &direct, fmt.Sprintf("direct weather %d", i))
	})
	t.Logf("weather (5%% cuts, 5%% stalls, 3%% 429): relay %s; direct %s; mock drew %v", relayRun, directRun, s.mockStats().Weather)

	// 2. A 429 storm: for 10 s half the calls get a 429 with
	// Retry-After: 1; a relay client and a direct client start every
	// 200 ms.
	s.setWeather(t, mockupstream.Weather{RateLimited: 0.5, RetryAfter: time.Second})
	relayStorm, directStorm := &runResult{}, &runResult{}
	var wg sync.WaitGroup
	stormEnd := time.Now().Add(10 * time.Second)
	for i := 0; time.Now().Before(stormEnd); i++ {
		wg.Go(func() { relayStorm.add(s.relayStream(ctx, seed, fmt.Sprintf("storm %d", i), false)) })
		wg.Go(func() { directStorm.add(directStream(ctx, &direct, fmt.Sprintf("direct storm %d", i))) })
		time.Sleep(200 * time.Millisecond)
	}
	s.setWeather(t, mockupstream.Weather{})
	wg.Wait()
	t.Logf("429 storm (50%% for 10 s): relay %s; direct %s", relayStorm, directStorm)

	if relayRun.exact != streams {
		t.Errorf("weather: the relay answered %s: want every answer exact and done", relayRun)
	}
	for _, c := range []struct {
		name          string
		relay, direct *runResult
	}{{"weather", relayRun, directRun}, {"429 storm", relayStorm, directStorm}} {
		if c.relay.share() < c.direct.share() {
			t.Errorf("%s: the relay completed %s, the direct client %s: worse than calling the provider directly", c.name, c.relay, c.direct)
		}
	}
}

// runResult counts the exact answers of a run, and the first error. It is
// safe for concurrent use.
type runResult struct {
	mu           sync.Mutex
	exact, total int
	firstErr     error
}

func (r *runResult) add(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total++
	if err == nil {
		r.exact++
	} else if r.firstErr == nil {
		r.firstErr = err
	}
}

func (r *runResult) share() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return float64(r.exact) / float64(max(r.total, 1))
}

func (r *runResult) String() string {
	share := r.share()
	r.mu.Lock()
	defer r.mu.Unlock()
	s := fmt.Sprintf("%d/%d exact (%.1f%%)", r.exact, r.total, 100*share)
	if r.firstErr != nil {
		s += fmt.Sprintf(", first failure: %v", r.firstErr)
	}
	return s
}

// inParallel runs answer(i) for every i below n, parallel at a time, and
// counts what they answered.
func inParallel(n, parallel int, answer func(i int) error) *runResult {
	r := &runResult{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallel)
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r.add(answer(i))
		})
	}
	wg.Wait()
	return r
}

// relayStream streams one answer through the relay from a random edge,
// dropping the connection now and then if drops, and checks it is exact
// and done.
func (s *system) relayStream(ctx context.Context, seed uint64, name string, drops bool) error {
	rng := rand.New(rand.NewPCG(seed, uint64(len(name))<<32|uint64(hashName(name))))
	msgs, want := prompt("Never worse: "+name+".", weatherTokens)
	c, err := postStream(ctx, s.Edges[rng.IntN(len(s.Edges))], msgs, want, nil)
	if err != nil {
		return err
	}
	pick := func() string { return s.Edges[rng.IntN(len(s.Edges))] }
	var drop func() bool
	if drops {
		drop = func() bool { return rng.Float64() < 2.0/weatherTokens }
	}
	if err := c.finish(ctx, pick, drop); err != nil {
		return err
	}
	return c.check()
}

// hashName spreads the names of a run over the random streams.
func hashName(name string) uint32 {
	h := uint32(2166136261)
	for i := range len(name) {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return h
}

// directStream streams one answer straight from the provider with the
// official client and its default retries, and checks it is exact and
// finished.
func directStream(ctx context.Context, client *openai.Client, name string) error {
	msgs, want := prompt("Never worse: "+name+".", weatherTokens)
	text, finish, err := directCall(ctx, client, msgs)
	switch {
	case err != nil:
		return err
	case text != want || finish != "stop":
		return fmt.Errorf("%s: not the whole answer", name)
	}
	return nil
}

// directCall streams the answer to msgs for mock-1 straight from the fake
// upstream with openai-go, and returns its text, its finish reason and
// why it ended early, if it did.
func directCall(ctx context.Context, client *openai.Client, msgs []mockupstream.Message) (text, finish string, err error) {
	st := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:    "mock-1",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(msgs[0].Content)},
	})
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if len(acc.Choices) > 0 {
		text, finish = acc.Choices[0].Message.Content, acc.Choices[0].FinishReason
	}
	if err := st.Err(); err != nil && !errors.Is(err, io.EOF) {
		return text, finish, err
	}
	return text, finish, nil
}

// mockURL is the fake upstream's root URL.
func (s *system) mockURL() string { return strings.TrimSuffix(s.mockProc.URL, "/v1") }

// setWeather changes the fake upstream's weather.
func (s *system) setWeather(t *testing.T, w mockupstream.Weather) {
	t.Helper()
	must(t, s.putMock("/mock/weather", map[string]any{"cut": w.Cut, "stall": w.Stall, "stall_for": w.StallFor.String(),
		"rate_limited": w.RateLimited, "retry_after": w.RetryAfter.String()}))
}

// putMock puts body, as JSON, to path on the fake upstream.
func (s *system) putMock(path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPut, s.mockURL()+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT %s: %s", path, resp.Status)
	}
	return nil
}

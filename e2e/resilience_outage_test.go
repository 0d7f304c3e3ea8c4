package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/fleet/breaker"
	"github.com/relaydev/relay/relay/mockupstream"
)

// A short outage is a queue, not a failure. Under steady new traffic (a
// request every 100 ms) the provider answers 503 to everything for 10 s.
// With the breaker's and the retries' defaults, every request completes
// after the provider is back, within breaker.max_wait, and from the moment
// every worker knew of the open breaker until the provider was back, it
// saw the breaker's probes alone; the breaker closes within one cooldown
// of the recovery. Beside it, the official openai-go client
// with its default retries calls the provider directly at the same pace,
// for comparison.
func TestOutageIsAQueue(t *testing.T) {
	const outage = 10 * time.Second
	c := start(t, options{Fleet: true, Workers: 3, Coordinator: true, Mock: mockupstream.Config{Tokens: 5},
		Tune: func(cfg *config.Config) {
			cfg.Providers[0].Retry = backoff.Config{}   // the defaults
			cfg.Providers[0].Breaker = breaker.Config{} // the defaults
		}})
	front := c.fronts["mock"]
	log := c.watchBreaker("mock")
	direct := openai.NewClient(option.WithBaseURL(front.url+"/"), option.WithAPIKey("direct"))
	directRun := &runResult{}

	type answer struct {
		status     int
		body       string
		sent, done time.Time
		content    string
	}
	var mu sync.Mutex
	var answers []answer
	var wg sync.WaitGroup
	send := func(i int) {
		content := fmt.Sprintf("Steady traffic %d.", i)
		a := answer{sent: time.Now(), content: content}
		status, _, body, err := unary(context.Background(), c.Edge, "mock-1", content)
		a.status, a.body, a.done = status, string(body), time.Now()
		if err != nil {
			a.body = err.Error()
		}
		mu.Lock()
		answers = append(answers, a)
		mu.Unlock()
	}

	began := time.Now()
	var down, up time.Time
	for i := 0; time.Since(began) < outage+3*time.Second; i++ {
		switch since := time.Since(began); {
		case down.IsZero() && since >= time.Second:
			front.down.Store(true)
			down = time.Now()
		case up.IsZero() && since >= time.Second+outage:
			front.down.Store(false)
			up = time.Now()
		}
		wg.Go(func() { send(i) })
		wg.Go(func() {
			content := fmt.Sprintf("Direct steady traffic %d.", i)
			res, err := direct.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
				Model: "mock-1", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(content)},
			})
			if err == nil && (len(res.Choices) != 1 || res.Choices[0].Message.Content != answerText(content, 5)) {
				err = fmt.Errorf("%q: not the whole answer", content)
			}
			directRun.add(err)
		})
		time.Sleep(100 * time.Millisecond)
	}
	opened := log.waitFor(t, breaker.Open, down, outage).state
	learned := c.learnedOpen(mockOne)
	wg.Wait()

	var slowest time.Duration
	failed := 0
	for _, a := range answers {
		var got struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		_ = json.Unmarshal([]byte(a.body), &got)
		if a.status != http.StatusOK || len(got.Choices) != 1 || got.Choices[0].Message.Content != answerText(a.content, 5) {
			t.Errorf("%q sent %v into the run: %d %s", a.content, a.sent.Sub(began).Round(time.Millisecond), a.status, a.body)
			failed++
		}
		slowest = max(slowest, a.done.Sub(a.sent))
	}
	if slowest > breaker.DefaultMaxWait {
		t.Errorf("the slowest request took %v, past breaker.max_wait %v", slowest, breaker.DefaultMaxWait)
	}

	// While it was down and every worker knew, the provider saw the
	// probes alone: the coordinator's (not in chats) and those of the
	// workers, one call per claim.
	const grace = 300 * time.Millisecond
	calls := front.chats(learned.Add(grace), up)
	claims := 0
	for _, ev := range c.events.transitions(breaker.HalfOpen) {
		if ev.At.After(learned) && ev.At.Before(up) && strings.HasPrefix(ev.By, "w") {
			claims++
		}
	}
	if len(calls) > claims {
		t.Errorf("%d client calls reached the dead provider after the breaker opened, and %d probes were claimed by workers", len(calls), claims)
	}
	// It closes within one cooldown of the recovery: the cooldown of the
	// last open before it, which its next probe ends.
	closed := log.waitFor(t, breaker.Closed, up, time.Minute).at
	var last breaker.State
	log.mu.Lock()
	for _, p := range log.phases {
		if p.at.Before(up) && p.state.Current() == breaker.Open {
			last = p.state
		}
	}
	log.mu.Unlock()
	if cooldown := last.Until.Sub(last.Since); closed.Sub(up) > cooldown+2*time.Second {
		t.Errorf("closed %v after the recovery, more than the cooldown of %v in force", closed.Sub(up), cooldown)
	}
	t.Logf("10 s outage: relay %d/%d exact; direct %s", len(answers)-failed, len(answers), directRun)
	if relayShare := float64(len(answers)-failed) / float64(len(answers)); relayShare < directRun.share() {
		t.Errorf("the relay completed %.1f%% of its requests, the direct client %s", 100*relayShare, directRun)
	}
	t.Logf("%d requests; breaker opened %v after the outage began (%s), closed %v after it ended; %d worker probes; slowest request %v",
		len(answers), opened.Since.Sub(down).Round(time.Millisecond), opened.Reason, closed.Sub(up).Round(time.Millisecond),
		claims, slowest.Round(time.Millisecond))
}

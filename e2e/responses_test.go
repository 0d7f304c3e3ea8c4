package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/relaydev/relay/relay/config"
	"github.com/relaydev/relay/relay/mockupstream"
)

// responsesClient is openai-go pointed at an edge, without retries.
func responsesClient(edge string) *responses.ResponseService {
	c := openai.NewClient(option.WithBaseURL(edge+"/v1/"), option.WithAPIKey("relay-dev"), option.WithMaxRetries(0))
	return &c.Responses
}

// inputOf is a Responses request of mock-1 for one user message.
func inputOf(content string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "mock-1", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(content)}}
}

// A provider that cuts the answer mid-stream is continued by a second
// call; the Responses client sees one message whose text is exact, its
// events numbered without a gap.
func TestResponsesContinuationIsInvisible(t *testing.T) {
	t.Parallel()
	sys := start(t, options{Record: true, Mock: mockupstream.Config{Tokens: 40, TokenInterval: -1}, Tune: withFastRetry(nil)})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const content = "[[mock: cut_after=5]] Tell me more."
	r := readResponseEvents(t, responsesClient(sys.Edge).NewStreaming(ctx, inputOf(content)), nil)
	want := answerText(content, 40)
	if r.text != want || !numberedFrom(r.seqs, 0) || r.last.Type != "response.completed" ||
		len(r.last.Response.Output) != 1 || r.last.Response.OutputText() != want {
		t.Fatalf("text %q, numbers %v, last %s with %d items; want %q", r.text, r.seqs, r.last.Type, len(r.last.Response.Output), want)
	}
	if calls := sys.fronts["mock"].allChats(); len(calls) != 2 {
		t.Fatalf("%d upstream calls; want the first and its continuation", len(calls))
	}
}

// An answer that the relay gave up on after partial text ends with
// response.incomplete, never completed; asked for whole it is a 200 (no
// SDK retries it and pays again) whose status says it is cut.
func TestResponsesRetriesExhaustedEndIncomplete(t *testing.T) {
	t.Parallel()
	sys := start(t, options{
		Record: true,
		Mock:   mockupstream.Config{Tokens: 100, TokenInterval: -1},
		Tune:   withFastRetry(func(cfg *config.Config) { cfg.Providers[0].Retry.MaxRetries = 2 }),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := responsesClient(sys.Edge)
	const content = "[[mock: cut_after=5, times=0]] Hello"
	want := tokensText(content, 100, 15)

	r := readResponseEvents(t, client.NewStreaming(ctx, inputOf(content)), nil)
	last := r.last.Response
	if r.text != want || r.last.Type != "response.incomplete" || last.Status != responses.ResponseStatusIncomplete ||
		last.IncompleteDetails.Reason == "" || last.IncompleteDetails.Reason == "max_output_tokens" || !numberedFrom(r.seqs, 0) {
		t.Fatalf("text %q, last %s %s (%q); want %q, incomplete", r.text, r.last.Type, last.Status, last.IncompleteDetails.Reason, want)
	}

	res, err := client.New(ctx, inputOf(content+" (whole)"))
	if err != nil || res.Status != responses.ResponseStatusIncomplete || res.OutputText() != tokensText(content+" (whole)", 100, 15) {
		t.Fatalf("whole: %v %+v", err, res)
	}
}

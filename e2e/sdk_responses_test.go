package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/openai/openai-go/v3/responses"

	"github.com/relaydev/relay/relay/mockupstream"
)

// responseEvents is what a client read of a Responses event stream: the
// text of its deltas and how many, its sequence numbers and its last
// event.
type responseEvents struct {
	text   string
	deltas int
	seqs   []int64
	last   responses.ResponseStreamEventUnion
}

// readResponseEvents reads s until its end, or until stop holds after an
// event (nil: never); then it closes s.
func readResponseEvents(t *testing.T, s *ssestream.Stream[responses.ResponseStreamEventUnion], stop func(responseEvents) bool) responseEvents {
	t.Helper()
	defer s.Close()
	var r responseEvents
	var text strings.Builder
	for s.Next() {
		ev := s.Current()
		r.seqs = append(r.seqs, ev.SequenceNumber)
		r.last = ev
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
			r.deltas++
		}
		r.text = text.String()
		if stop != nil && stop(r) {
			return r
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return r
}

// numberedFrom reports whether seqs are first, first+1, ...
func numberedFrom(seqs []int64, first int64) bool {
	for i, n := range seqs {
		if n != first+int64(i) {
			return false
		}
	}
	return len(seqs) > 0
}

// TestSDKGoResponses uses openai-go's Responses API against two edges,
// changing only its base URL: a streamed and a whole answer, a background
// response resumed with starting_after on the other edge, and a cancel.
func TestSDKGoResponses(t *testing.T) {
	sys := start(t, options{Edges: 2, Coordinator: true, Mock: mockupstream.Config{Tokens: sdkTokens, TokenInterval: 5 * time.Millisecond}, Tune: withOpsModels(nil)})
	first, second := responsesClient(sys.Edges[0]), responsesClient(sys.Edges[1])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	params := inputOf

	t.Run("stream", func(t *testing.T) {
		r := readResponseEvents(t, first.NewStreaming(ctx, params("go responses: stream")), nil)
		want := answerTo("go responses: stream")
		if r.text != want || r.last.Type != "response.completed" || r.last.Response.OutputText() != want || !numberedFrom(r.seqs, 0) {
			t.Fatalf("text %q, last %s %q, numbers %v; want %q", r.text, r.last.Type, r.last.Response.OutputText(), r.seqs, want)
		}
	})

	t.Run("whole", func(t *testing.T) {
		res, err := first.New(ctx, params("go responses: whole"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != responses.ResponseStatusCompleted || res.OutputText() != answerTo("go responses: whole") || res.Usage.OutputTokens != sdkTokens {
			t.Fatalf("status %s, text %q, usage %+v", res.Status, res.OutputText(), res.Usage)
		}
	})

	t.Run("background resumed on the other edge", func(t *testing.T) {
		p := params("go responses: background")
		p.Background = openai.Bool(true)
		res, err := first.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != responses.ResponseStatusQueued && res.Status != responses.ResponseStatusInProgress {
			t.Fatalf("background answer: status %s", res.Status)
		}
		// Five text deltas on the first edge, then the connection breaks.
		before := readResponseEvents(t, first.GetStreaming(ctx, res.ID, responses.ResponseGetParams{}),
			func(r responseEvents) bool { return r.deltas == 5 })
		cursor := before.seqs[len(before.seqs)-1]
		after := readResponseEvents(t, second.GetStreaming(ctx, res.ID, responses.ResponseGetParams{StartingAfter: openai.Int(cursor)}), nil)
		want := answerTo("go responses: background")
		if before.text+after.text != want || after.text == "" || !numberedFrom(after.seqs, cursor+1) || after.last.Type != "response.completed" {
			t.Fatalf("resumed %q + %q after %d (numbers %v, last %s); want %q", before.text, after.text, cursor, after.seqs, after.last.Type, want)
		}
		got, err := second.Get(ctx, res.ID, responses.ResponseGetParams{})
		if err != nil || got.Status != responses.ResponseStatusCompleted || got.OutputText() != want {
			t.Fatalf("retrieved: %v %+v", err, got)
		}
	})

	t.Run("refused stream", func(t *testing.T) {
		// The provider's 400 is the response's status: the SDK raises it
		// as such, not as an event of a 200.
		s := first.NewStreaming(ctx, params("[[mock: status=400]] go responses: refused"))
		for s.Next() {
		}
		var apiErr *openai.Error
		if !errors.As(s.Err(), &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Type != "invalid_request_error" {
			t.Fatalf("stream error = %v, want the provider's 400", s.Err())
		}
	})

	t.Run("unknown model", func(t *testing.T) {
		p := params("go responses: unknown model")
		p.Model = "no-such-model"
		_, err := first.New(ctx, p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
			t.Fatalf("error = %v, want a 404 model_not_found", err)
		}
	})

	t.Run("cancel", func(t *testing.T) {
		// The fake upstream stalls after 3 tokens: the answer is cut there.
		p := params("[[mock: stall_after=3, stall_for=20s]] go responses: cancel")
		p.Background = openai.Bool(true)
		res, err := first.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "text stored", func() bool {
			got, err := second.Get(ctx, res.ID, responses.ResponseGetParams{})
			return err == nil && got.OutputText() != ""
		})
		got, err := second.Cancel(ctx, res.ID)
		if err != nil || got.Status != responses.ResponseStatusCancelled {
			t.Fatalf("cancel: %v %+v", err, got)
		}
		r := readResponseEvents(t, first.GetStreaming(ctx, res.ID, responses.ResponseGetParams{}), nil)
		if r.last.Type != "response.incomplete" || r.last.Response.Status != responses.ResponseStatusCancelled || r.text != got.OutputText() {
			t.Fatalf("the cancelled stream ends %s %s with %q, cancel saw %q", r.last.Type, r.last.Response.Status, r.text, got.OutputText())
		}
	})
}

// nodeResponsesResult is what e2e/node/responses_test.mjs prints last.
type nodeResponsesResult struct {
	Whole struct {
		Text, Status, ID string
	} `json:"whole"`
	Refused struct {
		Name   string `json:"name"`
		Status int    `json:"status"`
	} `json:"refused"`
	Resumed struct {
		ID                                string
		Cursor                            int64
		Before, After, Last, Status, Text string
		Seqs                              []int64
	} `json:"resumed"`
}

// TestSDKNodeResponses runs the openai npm package's Responses API
// (e2e/node/responses_test.mjs) against two edge and two worker processes:
// a whole answer, then a stream cut after ten text deltas, whose worker is
// SIGKILLed before the client resumes it with starting_after on the other
// edge. The client gets one exact answer, numbered without a gap, and the
// takeover does not show.
func TestSDKNodeResponses(t *testing.T) {
	const tokens = 80
	s := start(t, options{Processes: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond}, Edges: 2, Workers: 2})
	const input = "node responses: the worker is killed mid-answer"
	var cut struct {
		ID     string `json:"id"`
		Cursor int64  `json:"cursor"`
	}
	var r nodeResponsesResult
	var id, owner string
	runNodeCut(t, "node/responses_test.mjs", []string{s.edgeProcs[0].URL + "/v1", s.edgeProcs[1].URL + "/v1", input}, func(line []byte) {
		must(t, json.Unmarshal(line, &cut))
		id = strings.TrimPrefix(cut.ID, "resp_")
		owner = s.killOwner(id)
	}, &r)
	if want := mockupstream.AnswerText([]mockupstream.Message{{Role: "user", Content: input + " (whole)"}}, tokens); r.Whole.Text != want || r.Whole.Status != "completed" {
		t.Errorf("whole answer %q (%s), want %q", r.Whole.Text, r.Whole.Status, want)
	}
	if r.Refused.Name != "BadRequestError" || r.Refused.Status != http.StatusBadRequest {
		t.Errorf("a refused stream raised %+v, want a BadRequestError (400)", r.Refused)
	}
	_, want := prompt(input, tokens)
	got := r.Resumed
	if got.Before+got.After != want || got.Before == "" || got.After == "" || got.Text != want {
		t.Errorf("resumed %q + %q (final %q), want %q split in two", got.Before, got.After, got.Text, want)
	}
	if got.Last != "response.completed" || got.Status != "completed" || !numberedFrom(got.Seqs, 0) || !slices.Contains(got.Seqs, cut.Cursor+1) {
		t.Errorf("last %s (%s), numbers %v", got.Last, got.Status, got.Seqs)
	}
	s.expectTakeover(id, owner)
}

// nodeStreamResult is what aisdk_test.mjs and langchain_test.mjs print
// last: the whole answer and the streamed one, each with how its client
// says it ended.
type nodeStreamResult struct {
	// FollowUp is aisdk_test.mjs's second turn on the whole answer.
	Whole, Stream, FollowUp struct {
		Text   string   `json:"text"`
		End    string   `json:"end"`
		Errors []string `json:"errors"`
	}
}

// TestSDKNodeClientsThroughAKilledWorker runs the Vercel AI SDK's default
// openai(model) and LangChain's ChatOpenAI with useResponsesApi, both
// speaking the Responses API, and the AI SDK's openai.chat(model), against
// an edge and two worker processes: a whole answer (with the AI SDK, and a
// follow-up turn on it, which its Responses model sends as an
// item_reference), then a streamed one whose worker is SIGKILLed after ten
// text parts. The stream goes on
// through the takeover and ends with the one exact answer, finished as the
// client expects.
func TestSDKNodeClientsThroughAKilledWorker(t *testing.T) {
	for _, tc := range []struct {
		name, script, end string
		args              []string
	}{
		{"ai sdk", "node/aisdk_test.mjs", "stop", nil},
		{"ai sdk chat", "node/aisdk_test.mjs", "stop", []string{"chat"}},
		{"langchain", "node/langchain_test.mjs", "completed", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const tokens = 80
			s := start(t, options{Processes: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond}, Edges: 1, Workers: 2})
			input := tc.name + ": the worker is killed mid-answer"
			var r nodeStreamResult
			var id, owner string
			runNodeCut(t, tc.script, append([]string{s.edgeProcs[0].URL + "/v1", input}, tc.args...), func([]byte) {
				open := s.frames.open()
				if len(open) != 1 {
					t.Fatalf("streams open at the cut: %v; want the streamed one", open)
				}
				id = open[0]
				owner = s.killOwner(id)
			}, &r)
			if want := mockupstream.AnswerText([]mockupstream.Message{{Role: "user", Content: input + " (whole)"}}, tokens); r.Whole.Text != want || r.Whole.End != tc.end {
				t.Errorf("whole answer %q (%s), want %q", r.Whole.Text, r.Whole.End, want)
			}
			if tc.script == "node/aisdk_test.mjs" {
				turns := []mockupstream.Message{{Role: "user", Content: input + " (whole)"}, {Role: "assistant", Content: r.Whole.Text}, {Role: "user", Content: "and then?"}}
				if want := mockupstream.AnswerText(turns, tokens); r.FollowUp.Text != want || r.FollowUp.End != tc.end {
					t.Errorf("follow-up answer %q (%s), want %q", r.FollowUp.Text, r.FollowUp.End, want)
				}
			}
			if _, want := prompt(input, tokens); r.Stream.Text != want || r.Stream.End != tc.end || len(r.Stream.Errors) > 0 {
				t.Errorf("streamed answer %q (%s, errors %v), want %q", r.Stream.Text, r.Stream.End, r.Stream.Errors, want)
			}
			s.expectTakeover(id, owner)
		})
	}
}

// TestSDKGoResponsesThroughAKilledWorker streams a Responses answer with
// openai-go from an edge and two worker processes, and SIGKILLs the worker
// after ten text deltas: the same stream goes on through the takeover,
// numbered without a gap, and ends completed with the one exact answer.
func TestSDKGoResponsesThroughAKilledWorker(t *testing.T) {
	const tokens = 80
	s := start(t, options{Processes: true, Mock: mockupstream.Config{Tokens: tokens, TokenInterval: 40 * time.Millisecond}, Edges: 1, Workers: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const input = "go responses: the worker is killed mid-answer"
	stream := responsesClient(s.edgeProcs[0].URL).NewStreaming(ctx, inputOf(input))
	defer stream.Close()
	var id, owner string
	var text strings.Builder
	var seqs []int64
	var last responses.ResponseStreamEventUnion
	deltas := 0
	for stream.Next() {
		ev := stream.Current()
		seqs = append(seqs, ev.SequenceNumber)
		last = ev
		if ev.Type == "response.created" {
			id = strings.TrimPrefix(ev.Response.ID, "resp_")
		}
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
			if deltas++; deltas == 10 {
				owner = s.killOwner(id)
			}
		}
	}
	must(t, stream.Err())
	if _, want := prompt(input, tokens); text.String() != want || last.Type != "response.completed" || last.Response.OutputText() != want || !numberedFrom(seqs, 0) {
		t.Fatalf("text %q, last %s %q, numbers %v; want %q", text.String(), last.Type, last.Response.OutputText(), seqs, want)
	}
	s.expectTakeover(id, owner)
}

// runNodeCut runs a node script of e2e/node that prints a line at its cut
// and its result as its last line. At the cut it calls cut with the line
// (the test kills a worker) and then writes a line to the script's stdin,
// for a script that waits for it; the result is decoded into result.
func runNodeCut(t *testing.T, script string, args []string, cut func(line []byte), result any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nodeBinary(t), append([]string{script}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	out := bufio.NewReader(stdout)
	line, err := out.ReadBytes('\n')
	if err != nil {
		t.Fatalf("%s: %q %v\n%s", script, line, err, stderr.String())
	}
	cut(line)
	_, err = io.WriteString(stdin, "go on\n")
	must(t, err)
	rest, err := io.ReadAll(out)
	if werr := cmd.Wait(); err != nil || werr != nil {
		t.Fatalf("%s: %v %v\n%s", script, err, werr, stderr.String())
	}
	if err := json.Unmarshal(rest, result); err != nil {
		t.Fatalf("%s printed %q: %v\n%s", script, rest, err, stderr.String())
	}
}

// killOwner SIGKILLs the worker that claimed stream id and returns its
// name.
func (s *system) killOwner(id string) string {
	owner := s.owner(id, 1, 5*time.Second).Frame.Worker
	must(s.t, s.worker(owner).Kill())
	s.t.Logf("SIGKILLed %s, the owner of %s", owner, id)
	return owner
}

// expectTakeover checks that another worker than owner took stream id
// over.
func (s *system) expectTakeover(id, owner string) {
	s.t.Helper()
	if claims := s.frames.claims(id); len(claims) != 2 || claims[1].Frame.Worker == owner {
		s.t.Errorf("claims by %v; want %s, then the other worker", claimWorkers(claims), owner)
	}
}

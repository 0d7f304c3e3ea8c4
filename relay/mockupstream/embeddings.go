package mockupstream

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
)

// DefaultDimensions is the length of an embedding when the request asks
// for none, as OpenAI's text-embedding-3-small.
const DefaultDimensions = 1536

// maxDimensions bounds the dimensions parameter.
const maxDimensions = 1 << 16

// embeddingsRequest holds the fields of POST /v1/embeddings the mock
// reads; input is a string, an array of strings, or token arrays.
type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	Dimensions     *int            `json:"dimensions"`
	EncodingFormat string          `json:"encoding_format"`
}

type embeddingList struct {
	Object string      `json:"object"`
	Data   []embedding `json:"data"`
	Model  string      `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

type embedding struct {
	Object    string `json:"object"`
	Index     int    `json:"index"`
	Embedding any    `json:"embedding"` // []float32, or a base64 string
}

// handleEmbeddings answers POST /v1/embeddings with a deterministic unit
// vector per input (Embedding). Fault directives in the inputs, the
// server's faults and its weather apply as for chat, as far as they can
// to an answer that is not streamed: status (with its Retry-After) and
// stall_before. The request counts under the conversation of its inputs
// (Stats.ByConversation), so times=K applies to retries.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	var req embeddingsRequest
	if !s.decodeForwarded(w, r, &req, &req.Model) {
		return
	}
	inputs, err := embeddingInputs(req.Input)
	if err != nil {
		writeError(w, http.StatusBadRequest, badRequest(err.Error(), "input"))
		return
	}
	dims := DefaultDimensions
	if req.Dimensions != nil {
		dims = *req.Dimensions
	}
	if dims < 1 || dims > maxDimensions {
		writeError(w, http.StatusBadRequest, badRequest(fmt.Sprintf("dimensions: must be between 1 and %d, got %d.", maxDimensions, dims), "dimensions"))
		return
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		writeError(w, http.StatusBadRequest, badRequest("encoding_format: must be float or base64.", "encoding_format"))
		return
	}
	if _, ok := s.applyFaults(w, r, req.Model, userMessages(inputs)); !ok {
		return
	}
	out := embeddingList{Object: "list", Model: req.Model, Data: make([]embedding, len(inputs))}
	for i, in := range inputs {
		v := Embedding(in, dims)
		out.Data[i] = embedding{Object: "embedding", Index: i, Embedding: v}
		if req.EncodingFormat == "base64" {
			out.Data[i].Embedding = encodeBase64(v)
		}
		out.Usage.PromptTokens += promptTokens(userMessages([]string{in})) - 3
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	writeJSON(w, http.StatusOK, out)
}

// Embedding is the mock's embedding of input: a unit vector of dims
// components drawn from a PRNG seeded by the input's hash, so the same
// input always gets the same vector and different ones differ.
func Embedding(input string, dims int) []float32 {
	d := sha256.Sum256([]byte(input))
	rng := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(d[0:8]), binary.LittleEndian.Uint64(d[8:16])))
	v := make([]float32, dims)
	var norm float64
	for i := range v {
		x := rng.NormFloat64()
		v[i] = float32(x)
		norm += x * x
	}
	norm = math.Sqrt(norm)
	for i := range v {
		v[i] = float32(float64(v[i]) / norm)
	}
	return v
}

// encodeBase64 is OpenAI's base64 encoding of an embedding: its float32
// components, little-endian.
func encodeBase64(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// embeddingInputs returns the inputs as strings; token arrays are written
// as their numbers, which keeps them deterministic.
func embeddingInputs(raw json.RawMessage) ([]string, error) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil && len(many) > 0 {
		return many, nil
	}
	var tokens []int
	if json.Unmarshal(raw, &tokens) == nil && len(tokens) > 0 {
		return []string{tokenText(tokens)}, nil
	}
	var batches [][]int
	if json.Unmarshal(raw, &batches) == nil && len(batches) > 0 {
		out := make([]string, len(batches))
		for i, t := range batches {
			out[i] = tokenText(t)
		}
		return out, nil
	}
	return nil, errors.New("input: must be a string, an array of strings, or an array of token arrays, and not empty.")
}

func tokenText(tokens []int) string {
	b := make([]byte, 0, 6*len(tokens))
	for _, t := range tokens {
		b = strconv.AppendInt(append(b, ' '), int64(t), 10)
	}
	return string(b)
}

// userMessages makes texts into user messages: what fault directives and
// the answer model read.
func userMessages(texts []string) []Message {
	m := make([]Message, len(texts))
	for i, t := range texts {
		m[i] = Message{Role: roleUser, Content: t}
	}
	return m
}

// decodeForwarded reads the body of a request of the forwarded endpoints
// into v and checks its model (*model once decoded), answering the error
// itself when it is not acceptable.
func (s *Server) decodeForwarded(w http.ResponseWriter, r *http.Request, v any, model *string) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, errorBody(http.StatusRequestEntityTooLarge,
				fmt.Sprintf("Request body larger than %d bytes.", maxBodyBytes)))
			return false
		}
		writeError(w, http.StatusBadRequest, badRequest("We could not parse the JSON body of your request: "+err.Error(), ""))
		return false
	}
	if !slices.Contains(s.cfg.Models, *model) {
		e := errorBody(http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", *model))
		e.Param, e.Code = ptr("model"), ptr("model_not_found")
		writeError(w, http.StatusNotFound, e)
		return false
	}
	return true
}

// applyFaults counts the request for model under the conversation of messages and
// applies the faults that end a request before its answer (status,
// stall_before, reset), as handleChat does. It returns the faults, and whether
// the answer goes out.
func (s *Server) applyFaults(w http.ResponseWriter, r *http.Request, model string, messages []Message) (faults, bool) {
	n := s.stats.conversation(ConversationKey(messages), r.Header)
	f, err := s.faultsFor(model, messages, n)
	if err != nil {
		writeError(w, http.StatusBadRequest, badRequest(err.Error(), ""))
		return f, false
	}
	if !f.before(r) {
		return f, false
	}
	if f.status != 0 {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		if f.retryAfterMS != "" {
			w.Header().Set("retry-after-ms", f.retryAfterMS)
		}
		writeError(w, f.status, errorBody(f.status, fmt.Sprintf("mock-upstream: injected fault status=%d", f.status)))
		return f, false
	}
	return f, true
}

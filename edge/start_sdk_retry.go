package edge

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
)

// # An SDK's own retries attach to the stream they retry
//
// The official OpenAI SDKs (openai-node, openai-go and the other
// Stainless-generated ones) retry a POST that failed in transport, or with
// a 408, 409, 429 or 5xx, up to twice, but send no idempotency key: the
// only mark of a retry is X-Stainless-Retry-Count, 0 on the first attempt
// and the attempt's number after it, with the same body. Treated as a new
// request, a retry of a non-stream request whose connection broke pays
// for the whole answer again. So, for a request without Idempotency-Key or
// X-Request-Id:
//
//   - a first attempt (count 0) always starts a new generation (two equal
//     requests are two samples, e.g. a "regenerate"), and records it under
//     its body's hash as if that were its idempotency key;
//   - a retry (count > 0) takes that key: it attaches to the recorded
//     stream, running or ended, or, if none is recorded, starts one.
//
// Two equal first attempts of one tenant at the same moment overwrite
// each other's record; a retry of the first may then be served the
// second's answer: an answer to the same request, not another's.

// HeaderSDKRetryCount is the attempt number the Stainless SDKs send.
const HeaderSDKRetryCount = "X-Stainless-Retry-Count"

// sdkAttempt is the request's X-Stainless-Retry-Count; -1 when it has
// none (or one that is no count).
func sdkAttempt(r *http.Request) int {
	n, err := strconv.Atoi(r.Header.Get(HeaderSDKRetryCount))
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// sdkKey is the idempotency key an SDK's attempts of body share.
func sdkKey(body []byte) string {
	sum := sha256.Sum256(body)
	return "sdk-retry:" + hex.EncodeToString(sum[:])
}

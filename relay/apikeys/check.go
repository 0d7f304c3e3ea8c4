package apikeys

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/relaydev/relay/relay/provider"
)

// Check asks provider p whether it takes key, with the cheapest call that
// needs one: GET {base_url}/models, authorized as p's type says (a bearer
// token, or x-api-key for anthropic, whose base_url ends in /v1 as well).
// A 2xx verifies the key and a 401 or 403 fails it; a network error, a
// 408, 429 or 5xx cannot tell (Pending, checked again later); any other
// answer means the provider has no model list to check keys with
// (Unchecked). ctx bounds the call.
func Check(ctx context.Context, hc *http.Client, p provider.Config, key string) Result {
	res := Result{State: Pending, At: time.Now()}
	t := p.Target(key)
	req, err := t.NewRequest(ctx, http.MethodGet, "/models", nil)
	if err != nil {
		res.State, res.Reason = Unchecked, err.Error()
		return res
	}
	t.Authorize(req.Header)
	resp, err := hc.Do(req)
	if err != nil {
		// The URL is base_url's: it holds no key.
		res.Reason = "unreachable: " + err.Error()
		return res
	}
	defer resp.Body.Close()
	// Read a little, so the connection is reused; the body is not shown,
	// as a refusal's message may quote part of the key.
	_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
	status := fmt.Sprintf("HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode))
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		res.State = Verified
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		res.State, res.Reason = Failed, "refused: "+status
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		res.Reason = status
	default:
		res.State, res.Reason = Unchecked, "cannot check: GET /models answered "+status
	}
	return res
}

// CheckAll checks every key of provider p once, each call bounded by
// timeout, and describes them in order, without the keys: what `relay
// keys check` prints. The keys of an api_keys_file are read now; an error
// says the file could not be read.
func CheckAll(ctx context.Context, hc *http.Client, p provider.Config, timeout time.Duration) ([]KeyStatus, error) {
	r, err := NewRing(p)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	keys := slices.Clone(r.keys)
	r.mu.Unlock()
	for _, k := range keys {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		r.record(k, Check(cctx, hc, p, k))
		cancel()
	}
	return r.Status(), nil
}

package edge

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/dialect/chat"
	"github.com/relaydev/relay/relay/natsconn"
	"github.com/relaydev/relay/relay/relaytest"
)

func TestChatRequestValidation(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{MaxBodyBytes: 256})
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		body   string
		status int
		param  string
		code   string
	}{
		{`not json`, 400, "", CodeInvalidJSON},
		{`[1,2]`, 400, "", CodeInvalidJSON},
		{`null`, 400, "", CodeInvalidJSON},
		{`{"model":"gpt-test",` + msgs + `} trailing`, 400, "", CodeInvalidJSON},
		{`{` + msgs + `}`, 400, "model", CodeInvalidValue},
		{`{"model":7,` + msgs + `}`, 400, "model", CodeInvalidValue},
		{`{"model":"",` + msgs + `}`, 400, "model", CodeInvalidValue},
		{`{"model":"gpt-nope",` + msgs + `}`, 404, "model", CodeModelNotFound},
		{`{"model":"gpt-test"}`, 400, "messages", CodeInvalidValue},
		{`{"model":"gpt-test","messages":[]}`, 400, "messages", CodeInvalidValue},
		{`{"model":"gpt-test","messages":{"role":"user"}}`, 400, "messages", CodeInvalidValue},
		{`{"model":"gpt-test","messages":[{"role":"user","content":"x"},"hi"]}`, 400, "messages[1]", CodeInvalidValue},
		{`{"model":"gpt-test","messages":[{"role":"user","content":"x"},{"content":"x"}]}`, 400, "messages[1].role", CodeInvalidValue},
		{`{"model":"gpt-test","messages":[{"role":5}]}`, 400, "messages[0].role", CodeInvalidValue},
		{`{"model":"gpt-test","stream":"yes",` + msgs + `}`, 400, "stream", CodeInvalidValue},
		{`{"model":"gpt-test","n":2,` + msgs + `}`, 400, "n", CodeInvalidValue},
		{`{"model":"gpt-test",` + msgs + `,"pad":"` + strings.Repeat("x", 256) + `"}`, 413, "", CodeBodyTooLarge},
	} {
		res := do(t, "POST", edge.url+"/v1/chat/completions", tc.body, nil)
		got := decodeError(t, res)
		if res.StatusCode != tc.status || got.Type != "invalid_request_error" || got.Param != tc.param || got.Code != tc.code || got.Message == "" {
			t.Errorf("%s: status %d, error %+v (param %q, code %q)", tc.body, res.StatusCode, got, got.Param, got.Code)
		}
		if res.Header.Get("X-Relay-Stream-Id") != "" {
			t.Errorf("%s: a rejected request got a stream", tc.body)
		}
	}
}

func decodeError(t *testing.T, res *http.Response) chat.Error {
	t.Helper()
	var body struct {
		Error chat.Error `json:"error"`
	}
	if err := jsonDecode(res, &body); err != nil {
		t.Fatalf("status %d: not an error body: %v", res.StatusCode, err)
	}
	return body.Error
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestRoutes(t *testing.T) {
	e := newEnv(t)
	edge := e.startEdge(Config{})
	for _, tc := range []struct {
		method, path string
		status       int
		body         string
	}{
		{"GET", "/v1/models", 200,
			`{"object":"list","data":[{"id":"gpt-test","object":"model","created":0,"owned_by":"relay"},{"id":"gpt-other","object":"model","created":0,"owned_by":"relay"}]}` + "\n"},
		{"GET", "/healthz", 200, "ok\n"},
		{"GET", "/readyz", 200, "ok\n"},
		{"GET", "/v1/nope", 404,
			`{"error":{"message":"unknown URL (GET /v1/nope)","type":"invalid_request_error","param":null,"code":"unknown_url"}}` + "\n"},
		{"GET", "/v1/streams/a/b", 404,
			`{"error":{"message":"unknown URL (GET /v1/streams/a/b)","type":"invalid_request_error","param":null,"code":"unknown_url"}}` + "\n"},
		{"GET", "/v1/chat/completions", 405,
			`{"error":{"message":"method GET not allowed on /v1/chat/completions","type":"invalid_request_error","param":null,"code":"method_not_allowed"}}` + "\n"},
		{"DELETE", "/v1/models", 405,
			`{"error":{"message":"method DELETE not allowed on /v1/models","type":"invalid_request_error","param":null,"code":"method_not_allowed"}}` + "\n"},
	} {
		res := do(t, tc.method, edge.url+tc.path, "", nil)
		if body := readAll(t, res); res.StatusCode != tc.status || body != tc.body {
			t.Errorf("%s %s: status %d body\n%s\nwant %d\n%s", tc.method, tc.path, res.StatusCode, body, tc.status, tc.body)
		}
	}
	if allow := do(t, "PUT", edge.url+"/v1/chat/completions", "", nil).Header.Get("Allow"); allow != "POST" {
		t.Errorf("Allow = %q", allow)
	}
}

func TestNotReadyWithoutAssets(t *testing.T) {
	srv := relaytest.NATS(t)
	nc, js, err := natsconn.Connect(natsconn.Config{URL: srv.ClientURL()}, t.Name(), relaytest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	s, err := New(Config{}, Deps{NC: nc, JS: js, Catalog: testCatalog(t)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	res := do(t, "GET", hs.URL+"/readyz", "", nil)
	if body := readAll(t, res); res.StatusCode != 503 || !strings.Contains(body, "RELAY_REQUESTS") {
		t.Fatalf("readyz: %d %s", res.StatusCode, body)
	}
	if res := do(t, "GET", hs.URL+"/healthz", "", nil); res.StatusCode != 200 {
		t.Fatalf("healthz: %d", res.StatusCode)
	}
	// A request cannot be stored without the bucket.
	res = do(t, "POST", hs.URL+"/v1/chat/completions", chatBody(true, "hi"), nil)
	if got := decodeError(t, res); res.StatusCode != 503 || got.Code != CodeUnavailable {
		t.Fatalf("POST without assets: %d %+v", res.StatusCode, got)
	}
}

func TestConfig(t *testing.T) {
	d := Config{}.WithDefaults()
	if !reflect.DeepEqual(d, Config{
		Listen: DefaultListen, Keepalive: DefaultKeepalive, RetryHint: DefaultRetryHint, MaxBodyBytes: DefaultMaxBodyBytes, ClientBuffer: DefaultClientBuffer,
		BodyTimeout: DefaultBodyTimeout, TurnWait: DefaultTurnWait, MaxConnections: DefaultMaxConnections,
		ResumeTokenTTL: DefaultResumeTokenTTL, IdempotencyWindow: DefaultIdempotencyWindow, MaxMessages: DefaultMaxMessages,
		MaxTokensCap: DefaultMaxTokensCap, WSMaxMessagesPerSecond: DefaultWSMaxMessagesPerSecond,
	}) {
		t.Fatalf("defaults %+v", d)
	}
	if err := (Config{}).Validate("edge"); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Listen: "8080"}, "edge.listen: "},
		{Config{Keepalive: -1}, "edge.keepalive: "},
		{Config{Keepalive: 1}, "edge.keepalive: "},
		{Config{RetryHint: -1}, "edge.retry_hint: "},
		{Config{MaxBodyBytes: -1}, "edge.max_body_bytes: "},
		{Config{ClientBuffer: -1}, "edge.client_buffer: "},
		{Config{ResumeTokenSecret: "short"}, "edge.resume_token_secret: "},
		{Config{ResumeTokenTTL: -1}, "edge.resume_token_ttl: "},
		{Config{ResumeTokenTTL: MaxResumeTokenTTL + time.Second}, "edge.resume_token_ttl: 24h0m1s is longer than the maximum, 24h0m0s"},
		{Config{APIKeys: []APIKey{{Tenant: "a", KeySHA256: "nothex"}}}, "edge.api_keys[0].key_sha256: "},
		{Config{APIKeys: []APIKey{{Tenant: "a b", KeySHA256: keyHash("k")}}}, "edge.api_keys[0].tenant: "},
		{Config{APIKeys: []APIKey{{Tenant: "a", KeySHA256: keyHash("k")}, {Tenant: "b", KeySHA256: keyHash("k")}}}, "edge.api_keys[1].key_sha256: "},
		{Config{APIKeys: []APIKey{{Tenant: "a", KeySHA256: keyHash("k"), Models: []string{""}}}}, "edge.api_keys[0].models[0]: "},
		{Config{CORSAllowedOrigins: []string{"https://a.example/path"}}, "edge.cors_allowed_origins[0]: "},
		{Config{CORSAllowedOrigins: []string{"a.example"}}, "edge.cors_allowed_origins[0]: "},
	} {
		if err := tc.cfg.Validate("edge"); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want prefix %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := New(Config{ClientBuffer: -1}, Deps{}); err == nil || !strings.HasPrefix(err.Error(), "edge.client_buffer") {
		t.Errorf("New with a bad config: %v", err)
	}
	if _, err := New(Config{}, Deps{}); err == nil {
		t.Error("New without deps succeeded")
	}
	e := newEnv(t)
	_, err := New(Config{APIKeys: []APIKey{{Tenant: "a", KeySHA256: keyHash("k"), Models: []string{testModel, "gpt-nope"}}}},
		Deps{NC: e.nc, JS: e.js, Catalog: testCatalog(t)})
	if err == nil || !strings.HasPrefix(err.Error(), "edge.api_keys[0].models[1]: ") {
		t.Errorf("New with a key for a model nobody serves: %v", err)
	}
}

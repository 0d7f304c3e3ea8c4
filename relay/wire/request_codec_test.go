package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecodeRequest holds the hand-written decoder to encoding/json: the
// request, or the error-or-not, is the same.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"stream_id":"s1","tenant":"t","key":"k","model":"m","body":{"model":"m","messages":[]},"created":1700000000,"fail_fast":true,"request_id":"r"}`,
		`{"stream_id":"s1","model":"m","body":null,"created":1}`,
		`{"stream_id":"s1","model":"m","body":{},"created":1,"models":["m","m-mini"]}`,
		`{"models":[ "a" , "b\u0041" ]}`, `{"models":[]}`, `{"models":null}`, `{"models":["a",1]}`, `{"models":["a",]}`,
		`{"stream_id":"s1","model":"m","body":{},"created":1,"created":2}`,
		`{"Stream_ID":"s1"}`, `{"stream_id":null}`, `{"stream_id":"a\u0041"}`, `{"created":1.5}`, `{"fail_fast":1}`, `[]`, `null`, `{"body":[1,}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := decodeRequestCommon(data)
		if !ok {
			return
		}
		var want Request
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("decoded %q by hand, encoding/json: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: by hand %+v, encoding/json %+v", data, got, want)
		}
	})
}

// FuzzRequestEncode: what Encode writes is the request json.Marshal
// writes, its body the same JSON value, and DecodeRequest reads it back.
func FuzzRequestEncode(f *testing.F) {
	f.Add("s1", "tenant", "key", "gpt-4o", []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"<hi> & \u2028"}]}`), int64(1700000000), true, "req", "gpt-4o,gpt-4o-mini")
	f.Add("", "", "", "", []byte(nil), int64(-1), false, "", "")
	f.Add("a\"b\\", "\x7f\xff", "<&>", "\u2029", []byte(` [ 1 , 2 ] `), int64(0), false, "\n", "<&>,\x7f")
	f.Fuzz(func(t *testing.T, id, tenant, key, model string, body []byte, created int64, failFast bool, requestID, models string) {
		if body != nil && !json.Valid(body) {
			return
		}
		r := Request{StreamID: id, Tenant: tenant, Key: key, Model: model, Body: body, Created: created, FailFast: failFast, RequestID: requestID}
		if models != "" {
			r.Models = strings.Split(models, ",")
		}
		enc := r.Encode()
		std, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var got, want Request
		if err := json.Unmarshal(enc, &got); err != nil {
			t.Fatalf("Encode wrote %q: %v", enc, err)
		}
		if err := json.Unmarshal(std, &want); err != nil {
			t.Fatal(err)
		}
		if !sameJSON(t, got.Body, want.Body) {
			t.Fatalf("body %s, json.Marshal's %s", got.Body, want.Body)
		}
		back, err := DecodeRequest(enc)
		if err != nil || !bytes.Equal(back.Body, got.Body) {
			t.Fatalf("DecodeRequest(%q) = %+v, %v", enc, back, err)
		}
		got.Body, want.Body, back.Body = nil, nil, nil
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(back, got) {
			t.Fatalf("Encode %q\njson.Marshal %q\nread back %+v", enc, std, back)
		}
	})
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&va) != nil || db.Decode(&vb) != nil {
		t.Fatalf("%q or %q is not JSON", a, b)
	}
	return reflect.DeepEqual(va, vb)
}

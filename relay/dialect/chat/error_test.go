package chat

import (
	"encoding/json"
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

func TestErrorIsWrittenAsOpenAIWritesIt(t *testing.T) {
	for _, tc := range []struct {
		e    wire.Error
		want string
	}{
		{wire.Error{Message: "m", Type: "invalid_request_error"}, `{"message":"m","type":"invalid_request_error","param":null,"code":null}`},
		{wire.Error{Message: "m", Type: "t", Param: "model", Code: "model_not_found", Status: 404}, `{"message":"m","type":"t","param":"model","code":"model_not_found"}`},
	} {
		b, err := json.Marshal(ErrorOf(&tc.e))
		if err != nil || string(b) != tc.want {
			t.Errorf("ErrorOf(%+v) = %s, %v; want %s", tc.e, b, err, tc.want)
		}
		var back Error
		if err := json.Unmarshal(b, &back); err != nil || back != ErrorOf(&tc.e) {
			t.Errorf("read back %+v, %v", back, err)
		}
	}
}

package responses

import (
	"reflect"
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

// What the worker reads from a Responses provider the edge renders back
// the same.
func TestUsageSurvivesTheChatShape(t *testing.T) {
	for _, u := range []Usage{
		{InputTokens: 12, OutputTokens: 30, TotalTokens: 42},
		{InputTokens: 1200, InputTokensDetails: InputDetails{CachedTokens: 1000}, OutputTokens: 70,
			OutputTokensDetails: OutputDetails{ReasoningTokens: 50}, TotalTokens: 1270},
	} {
		chat := &wire.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens, TotalTokens: u.TotalTokens,
			PromptTokensDetails: u.PromptDetails(), CompletionTokensDetails: u.CompletionDetails()}
		if got := UsageOf(chat); !reflect.DeepEqual(*got, u) {
			t.Errorf("%+v through chat usage %+v came back %+v", u, chat, *got)
		}
	}
	if UsageOf(nil) != nil {
		t.Error("UsageOf(nil) is not nil")
	}
}

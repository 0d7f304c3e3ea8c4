package anthropic

import (
	"reflect"
	"testing"

	"github.com/relaydev/relay/relay/wire"
)

// What the worker reads from an Anthropic provider (Prompt,
// PromptDetails) the edge renders back the same (UsageOf).
func TestUsageSurvivesTheChatShape(t *testing.T) {
	for _, u := range []Usage{
		{InputTokens: 12, OutputTokens: 30},
		{InputTokens: 3, CacheCreationInputTokens: 200, CacheReadInputTokens: 1000, OutputTokens: 7,
			ServerToolUse: wire.TokenCounts{{Name: "web_search_requests", N: 2}}},
		{CacheReadInputTokens: 50, OutputTokens: 1},
	} {
		chat := &wire.Usage{PromptTokens: u.Prompt(), CompletionTokens: u.OutputTokens, TotalTokens: u.Prompt() + u.OutputTokens,
			PromptTokensDetails: u.PromptDetails(), ServerToolUse: u.ServerToolUse}
		if got := UsageOf(chat); !reflect.DeepEqual(got, u) {
			t.Errorf("%+v through chat usage %+v came back %+v", u, chat, got)
		}
	}
	if got := UsageOf(nil); !reflect.DeepEqual(got, Usage{}) {
		t.Errorf("UsageOf(nil) = %+v", got)
	}
}

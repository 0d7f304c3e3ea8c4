package provider

import (
	"reflect"
	"testing"

	"github.com/relaydev/relay/relay/upstream"
)

func TestTypeTarget(t *testing.T) {
	for typ, want := range map[Type]upstream.Dialect{
		"":                  upstream.DialectChat,
		TypeOpenAI:          upstream.DialectChat,
		TypeAnthropic:       upstream.DialectAnthropic,
		TypeOpenAIResponses: upstream.DialectResponses,
	} {
		c := Config{Name: "p", BaseURL: "http://p/v1", Type: typ, Models: []string{"m"}}
		if err := c.Validate("p"); err != nil {
			t.Errorf("type %q: %v", typ, err)
		}
		got := c.Target("k")
		if !reflect.DeepEqual(got, upstream.Target{Provider: "p", BaseURL: "http://p/v1", APIKey: "k", Dialect: want}) {
			t.Errorf("type %q: Target = %+v, want dialect %q", typ, got, want)
		}
	}
}

// A Responses provider cannot extend a prefill, so its continuations are in
// prompt mode even where the model asks for prefill.
func TestResponsesProviderContinuesInPromptMode(t *testing.T) {
	c, err := NewCatalog([]Config{
		{Name: "r", BaseURL: "http://r/v1", Type: TypeOpenAIResponses, Models: []string{"m"}},
		{Name: "a", BaseURL: "http://a/v1", Type: TypeAnthropic, Models: []string{"m"}},
	}, Model{Name: "m", Continuation: Prefill})
	if err != nil {
		t.Fatal(err)
	}
	route := c.Route("m")
	if len(route) != 2 || route[0].Continuation != Prompt || route[1].Continuation != Prefill {
		t.Fatalf("Route = %+v, want prompt on r, prefill on a", route)
	}
}

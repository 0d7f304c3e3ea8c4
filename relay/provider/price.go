package provider

import "fmt"

// Price is what a model costs, in US dollars per million tokens. The zero
// Price means the model is not priced, and its cost counts as 0.
type Price struct {
	InputPerMTok  float64 `koanf:"input_per_mtok"`
	OutputPerMTok float64 `koanf:"output_per_mtok"`
}

// Cost is the price of one call's usage.
func (p Price) Cost(promptTokens, completionTokens int) float64 {
	return (float64(promptTokens)*p.InputPerMTok + float64(completionTokens)*p.OutputPerMTok) / 1e6
}

func (p Price) validate(key string) error {
	switch {
	case p.InputPerMTok < 0:
		return fmt.Errorf("%s.input_per_mtok: %v is negative", key, p.InputPerMTok)
	case p.OutputPerMTok < 0:
		return fmt.Errorf("%s.output_per_mtok: %v is negative", key, p.OutputPerMTok)
	}
	return nil
}

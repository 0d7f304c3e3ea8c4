package tracing

import (
	"fmt"
	"net/url"
	"time"
)

// Config switches tracing on and says where spans go.
type Config struct {
	// Endpoint is the base URL of an OTLP/HTTP collector, such as
	// http://collector:4318; spans are posted to Endpoint + "/v1/traces".
	// Zero: tracing is off (main also takes OTEL_EXPORTER_OTLP_ENDPOINT).
	Endpoint string `koanf:"endpoint"`
	// SampleRatio is the share of new traces recorded, in (0, 1]; zero: 1.
	// A span that continues a trace (a worker's job) follows the decision
	// made where the trace started, so a trace is whole or absent.
	SampleRatio float64 `koanf:"sample_ratio"`
	// ExportInterval is how long a finished span may wait before it is
	// sent; zero: 1s. A process killed loses what it holds, so a worker
	// that dies mid-answer shows in its trace only with what it sent
	// before.
	ExportInterval time.Duration `koanf:"export_interval"`
}

// DefaultExportInterval is the zero Config's ExportInterval.
const DefaultExportInterval = time.Second

// Enabled reports whether spans are exported.
func (c Config) Enabled() bool { return c.Endpoint != "" }

// Validate checks c, naming keys under prefix.
func (c Config) Validate(prefix string) error {
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s.endpoint: %q is not an http(s) URL such as http://collector:4318", prefix, c.Endpoint)
		}
	}
	if c.SampleRatio < 0 || c.SampleRatio > 1 {
		return fmt.Errorf("%s.sample_ratio: %v is not within (0, 1] (zero: 1)", prefix, c.SampleRatio)
	}
	if c.ExportInterval < 0 {
		return fmt.Errorf("%s.export_interval: %v is negative", prefix, c.ExportInterval)
	}
	return nil
}

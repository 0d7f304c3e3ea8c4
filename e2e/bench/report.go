package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// figure is one row of the result table.
type figure struct {
	Name string `json:"name"`
	Unit string `json:"unit"`
	// Relay is the relay's measurement; NA says why there is none.
	Relay *dist  `json:"relay,omitempty"`
	NA    string `json:"na,omitempty"`
	// Baseline is measured in the same run; BaselineName says what it is.
	Baseline     *dist  `json:"baseline,omitempty"`
	BaselineName string `json:"baseline_name"`
	// Added is relay minus baseline, for latencies.
	Added *added `json:"added,omitempty"`
	// Ratio is relay median / baseline median; RatioPct shows it as a
	// percentage (throughput against its ceiling).
	Ratio    float64 `json:"ratio,omitempty"`
	RatioPct bool    `json:"-"`
	Goal     string  `json:"goal,omitempty"`
	// Verdict is "met", "missed", "n/a" or empty when there is no goal.
	Verdict string `json:"verdict,omitempty"`
	Note    string `json:"note,omitempty"`
	// rank orders the table in the order of its goals, whatever order
	// the phases ran in.
	rank int
}

// Ranks of the figures in the table.
const (
	rankTTFT = iota
	rankGap
	rankThroughput
	rankConcurrent
	rankResume
	rankDurable
	rankFailover
	rankBreaker
	rankWorkerMemory
	rankRounds
)

type added struct {
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
}

// compare fills Added and Ratio from Relay and Baseline.
func (f *figure) compare() {
	if f.Relay == nil || f.Baseline == nil || f.Relay.N == 0 || f.Baseline.N == 0 {
		return
	}
	f.Added = &added{Median: f.Relay.Median - f.Baseline.Median, P99: f.Relay.P99 - f.Baseline.P99}
	if f.Baseline.Median != 0 {
		f.Ratio = f.Relay.Median / f.Baseline.Median
	}
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "missed"
}

// report is everything the run measured.
type report struct {
	Header  header   `json:"header"`
	Figures []figure `json:"figures"`
	// Failures are phases that could not be measured.
	Failures []string `json:"failures,omitempty"`
}

func (r *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// writeMarkdown prints the header and the one table.
func (r *report) writeMarkdown(w io.Writer) {
	h := r.Header
	fmt.Fprintf(w, "## relay benchmark (%s)\n\n", h.Mode)
	fmt.Fprintf(w, "- machine: %d cores (%s), %.1f GiB memory, %s\n", h.Cores, h.CPU, h.MemoryGiB, h.OS)
	fmt.Fprintf(w, "- Go %s; nats-server %s (%s)\n", h.Go, h.NATSServer, h.Storage)
	fmt.Fprintf(w, "- command: `%s`\n", h.Command)
	fmt.Fprintf(w, "- date: %s; duration %s; load average %s\n", h.Date, h.Duration, h.Load)
	if h.ServerCPU != "" {
		fmt.Fprintf(w, "- nats-server CPU over the run: %s\n", h.ServerCPU)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| figure | relay | baseline | relay − baseline | ratio | goal | |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, f := range r.Figures {
		relay := f.NA
		if f.Relay != nil {
			relay = formatDist(*f.Relay, f.Unit)
		}
		base := f.BaselineName
		if f.Baseline != nil {
			base += ": " + formatDist(*f.Baseline, f.Unit)
		}
		diff := ""
		if f.Added != nil {
			diff = signed(f.Added.Median) + " " + f.Unit
			if f.Relay.N >= manySamples && f.Baseline.N >= manySamples {
				diff += " · p99 " + signed(f.Added.P99) + " " + f.Unit
			}
		}
		ratio := ""
		switch {
		case f.Ratio != 0 && f.RatioPct:
			ratio = fmt.Sprintf("%.0f %%", 100*f.Ratio)
		case f.Ratio != 0:
			ratio = fmt.Sprintf("%.2f×", f.Ratio)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", f.Name, relay, base, diff, ratio, f.Goal, f.Verdict)
	}
	var notes []string
	for _, f := range r.Figures {
		if f.Note != "" {
			notes = append(notes, fmt.Sprintf("- %s: %s", f.Name, f.Note))
		}
	}
	for _, fail := range r.Failures {
		notes = append(notes, "- not measured: "+fail)
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\n%s\n", strings.Join(notes, "\n"))
	}
}

// formatDist renders median and p99, or median and the range when there
// are too few samples for a p99.
func formatDist(d dist, unit string) string {
	switch {
	case d.N == 0:
		return "no samples"
	case d.N == 1:
		return num(d.Median) + " " + unit
	case d.N < manySamples:
		return fmt.Sprintf("%s %s [%s–%s] (n=%d)", num(d.Median), unit, num(d.Min), num(d.Max), d.N)
	}
	return fmt.Sprintf("%s · p99 %s %s (n=%s)", num(d.Median), num(d.P99), unit, num(float64(d.N)))
}

// num prints a value with about three significant digits, and thousands
// separated.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1000:
		s := fmt.Sprintf("%.0f", a)
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		if v < 0 {
			return "-" + b.String()
		}
		return b.String()
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func signed(v float64) string {
	if v >= 0 {
		return "+" + num(v)
	}
	return num(v)
}

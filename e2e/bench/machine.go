package main

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// header states where and how the figures were measured.
type header struct {
	Mode       string  `json:"mode"`
	Cores      int     `json:"cores"`
	CPU        string  `json:"cpu"`
	MemoryGiB  float64 `json:"memory_gib"`
	OS         string  `json:"os"`
	Go         string  `json:"go"`
	NATSServer string  `json:"nats_server"`
	Storage    string  `json:"storage"`
	Command    string  `json:"command"`
	Date       string  `json:"date"`
	// Load is the load average before and after the run: the machine may
	// be shared, and every figure here is CPU-bound on two cores.
	Load     string `json:"load"`
	Duration string `json:"duration"`
	// ServerCPU is each nats-server's processor time over the run, and
	// the busiest one's against their mean.
	ServerCPU string `json:"server_cpu,omitempty"`
}

func machineHeader(mode string) header {
	h := header{
		Mode:  mode,
		Cores: runtime.NumCPU(),
		CPU:   procField("/proc/cpuinfo", "model name"),
		OS:    runtime.GOOS + "/" + runtime.GOARCH,
		Go:    runtime.Version(),
		Date:  time.Now().UTC().Format(time.RFC3339),
	}
	if kb, err := strconv.ParseFloat(strings.TrimSuffix(procField("/proc/meminfo", "MemTotal"), " kB"), 64); err == nil {
		h.MemoryGiB = kb / (1 << 20)
	}
	if release, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		h.OS += ", Linux " + strings.TrimSpace(string(release))
	}
	h.Command = command()
	h.Load = "before " + loadAverage()
	return h
}

// loadAverage is the one-minute load average.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	one, _, _ := strings.Cut(string(b), " ")
	return one
}

// command is how the benchmark was invoked: `go run` builds into a
// temporary directory, so its binary path says nothing useful.
func command() string {
	name := os.Args[0]
	if strings.Contains(name, "go-build") {
		name = "go -C e2e run ./bench"
	}
	return strings.Join(append([]string{name}, os.Args[1:]...), " ")
}

// procField returns the value of the first "key: value" line of a /proc
// file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

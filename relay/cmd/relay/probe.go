package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// probeTimeout bounds a probe: a kubelet gives its exec probes a second by
// default, and one that does not answer in time is as good as a failure.
const probeTimeout = 5 * time.Second

// runProbe is `relay probe URL`: it GETs URL and succeeds on a 2xx answer,
// for container probes of an ops listener bound to loopback, which the
// kubelet cannot reach over HTTP and the image, which has no shell or
// curl, cannot reach otherwise.
func runProbe(args []string, stdout io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fmt.Fprintln(stdout, "usage: relay probe URL (e.g. http://127.0.0.1:8083/healthz): succeeds on a 2xx answer")
		return nil
	}
	if len(args) != 1 {
		return errors.New("probe: want one URL, e.g. relay probe http://127.0.0.1:8083/healthz")
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, args[0], nil)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("probe: %s: %s: %s", args[0], res.Status, body)
	}
	return nil
}

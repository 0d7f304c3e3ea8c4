package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/relaydev/relay/e2e/procs"
)

// A nats-server capped at a share of a core stands for a machine of its
// own in a scale-out measurement (--server-cpu): two cores cannot hold
// five servers at full speed, but five servers each held to a fifth of a
// core compare with three held to the same, and the cluster whose work
// spreads over its servers gains from the two more. The cap is a CPU
// quota of a control group of its own for each server (the cgroup v2
// cpu.max, or the v1 cpu controller's cfs quota), made by the benchmark,
// which runs as root, and removed at its end.

// cpuCap is one server's control group.
type cpuCap struct{ dir string }

// cgroupRoots are where a control group with a CPU quota can be made:
// the unified (v2) hierarchy, mounted at the top or beside v1's, then
// v1's cpu controller.
var cgroupRoots = []struct {
	dir string
	v2  bool
}{{"/sys/fs/cgroup", true}, {"/sys/fs/cgroup/unified", true}, {"/sys/fs/cgroup/cpu", false}}

// capCPU holds p to cores of CPU time.
func capCPU(p *procs.Process, cores float64) (*cpuCap, error) {
	const period = 100 * time.Millisecond
	quota := time.Duration(cores * float64(period))
	for _, root := range cgroupRoots {
		if root.v2 && !hasController(root.dir, "cpu") {
			continue
		}
		if !root.v2 {
			if _, err := os.Stat(filepath.Join(root.dir, "cpu.cfs_quota_us")); err != nil {
				continue
			}
		}
		dir := filepath.Join(root.dir, "relay-bench-"+p.Name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("cpu cap of %s: %w", p.Name, err)
		}
		var err error
		if root.v2 {
			err = os.WriteFile(filepath.Join(dir, "cpu.max"), fmt.Appendf(nil, "%d %d", quota.Microseconds(), period.Microseconds()), 0o644)
		} else {
			err = os.WriteFile(filepath.Join(dir, "cpu.cfs_period_us"), fmt.Append(nil, period.Microseconds()), 0o644)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, "cpu.cfs_quota_us"), fmt.Append(nil, quota.Microseconds()), 0o644)
			}
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(p.Pid())), 0o644)
		}
		if err != nil {
			_ = os.Remove(dir)
			return nil, fmt.Errorf("cpu cap of %s: %w", p.Name, err)
		}
		return &cpuCap{dir: dir}, nil
	}
	return nil, errors.New("cpu cap: no cgroup hierarchy with a CPU controller (needs root and a cgroup v1 cpu or v2 hierarchy)")
}

// hasController reports whether the v2 hierarchy at dir offers a
// controller to its children.
func hasController(dir, name string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	return err == nil && strings.Contains(" "+strings.TrimSpace(string(b))+" ", " "+name+" ")
}

// remove removes the control group, once its process has exited.
func (c *cpuCap) remove() { _ = os.Remove(c.dir) }

// serverSpread says each nats-server's processor time since the cluster
// was up, and the busiest one's against their mean: a cluster whose work
// is spread over its servers has them alike.
func (b *bench) serverSpread() string {
	var parts []string
	var total, most time.Duration
	for i, n := range b.natsProcs {
		used, err := n.CPUTime()
		if err != nil {
			return ""
		}
		used -= b.natsCPUAtStart[i]
		total += used
		most = max(most, used)
		parts = append(parts, fmt.Sprintf("%s %.1f s", n.Name, used.Seconds()))
	}
	if total == 0 {
		return ""
	}
	mean := total / time.Duration(len(b.natsProcs))
	return fmt.Sprintf("%s; the busiest %.2f× the mean", strings.Join(parts, ", "), float64(most)/float64(mean))
}

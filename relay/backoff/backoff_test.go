package backoff

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// seeded returns a reproducible, concurrency-safe Rand, so that the
// distribution checks below are deterministic rather than flaky.
func seeded(seed uint64) func(int64) int64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func(n int64) int64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Int64N(n)
	}
}

func TestCeiling(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		n    int
		want time.Duration
	}{
		{Config{}, -1, 500 * time.Millisecond},
		{Config{}, 0, 500 * time.Millisecond},
		{Config{}, 1, time.Second},
		{Config{}, 3, 4 * time.Second},
		{Config{}, 4, 8 * time.Second},
		{Config{}, 5, 8 * time.Second},
		{Config{}, 1000, 8 * time.Second},
		{Config{Base: 3 * time.Second}, 1, 6 * time.Second},
		{Config{Base: 3 * time.Second}, 2, 8 * time.Second},
		{Config{Base: time.Nanosecond, Cap: 1<<63 - 1}, 200, 1<<63 - 1},
	} {
		if got := (Backoff{Config: tc.cfg}).Ceiling(tc.n); got != tc.want {
			t.Errorf("%+v.Ceiling(%d) = %v, want %v", tc.cfg, tc.n, got, tc.want)
		}
	}
}

// Full jitter: the delays of retry n cover [0, ceiling) uniformly. Checked
// over many draws per retry: every draw in bounds, the mean near the middle,
// both ends reached, and each tenth of the interval holding about a tenth
// of the draws.
func TestDelayIsUniformBelowTheCeiling(t *testing.T) {
	const draws, buckets = 20000, 10
	b := Backoff{Rand: seeded(1)}
	for n := range 6 {
		ceiling := b.Ceiling(n)
		var sum time.Duration
		lo, hi := ceiling, time.Duration(0)
		var hist [buckets]int
		for range draws {
			d := b.Delay(n, 0)
			if d < 0 || d >= ceiling {
				t.Fatalf("retry %d: delay %v outside [0, %v)", n, d, ceiling)
			}
			sum += d
			lo, hi = min(lo, d), max(hi, d)
			hist[int(d*buckets/ceiling)]++
		}
		if mean := sum / draws; mean < ceiling*47/100 || mean > ceiling*53/100 {
			t.Errorf("retry %d: mean %v, want about %v", n, mean, ceiling/2)
		}
		if lo > ceiling/100 || hi < ceiling*99/100 {
			t.Errorf("retry %d: draws span [%v, %v], want nearly all of [0, %v)", n, lo, hi, ceiling)
		}
		for i, c := range hist {
			if c < draws/buckets*85/100 || c > draws/buckets*115/100 {
				t.Errorf("retry %d: tenth %d holds %d of %d draws, want about %d", n, i, c, draws, draws/buckets)
			}
		}
	}
}

func TestDelayHonoursTheFloor(t *testing.T) {
	b := Backoff{Rand: seeded(2)}
	above := 0
	for range 1000 {
		// Below the ceiling of retry 0 (500ms): the floor wins every time.
		if d := b.Delay(0, 2*time.Second); d != 2*time.Second {
			t.Fatalf("Delay(0, 2s) = %v, want 2s", d)
		}
		// Ceiling 4s: never below the floor, often above it.
		d := b.Delay(3, 2*time.Second)
		if d < 2*time.Second || d >= 4*time.Second {
			t.Fatalf("Delay(3, 2s) = %v, want within [2s, 4s)", d)
		}
		if d > 2*time.Second {
			above++
		}
	}
	if above < 400 {
		t.Errorf("only %d of 1000 delays above the floor: the jitter above it is lost", above)
	}
	// A floor above the cap is still honoured: the provider asked for it.
	if d := b.Delay(10, time.Minute); d != time.Minute {
		t.Errorf("Delay(10, 1m) = %v, want 1m", d)
	}
}

func TestWaitWaitsTheDrawnDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := Backoff{Rand: func(n int64) int64 { return n - 1 }}
		start := time.Now()
		d, err := b.Wait(context.Background(), 2, 0)
		if err != nil || d != 2*time.Second-1 {
			t.Fatalf("Wait = %v, %v; want 2s-1ns", d, err)
		}
		if waited := time.Since(start); waited != d {
			t.Fatalf("waited %v, want %v", waited, d)
		}
	})
}

func TestWaitHonoursRetryAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := Backoff{Rand: seeded(3)}
		start := time.Now()
		if _, err := b.Wait(context.Background(), 0, 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 2*time.Second {
			t.Fatalf("waited %v, want the 2s Retry-After", waited)
		}
	})
}

func TestWaitStopsWhenCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := Backoff{}.Wait(ctx, 0, time.Hour)
		if err != context.DeadlineExceeded {
			t.Fatalf("Wait err = %v, want the ctx deadline", err)
		}
		if waited := time.Since(start); waited != 100*time.Millisecond {
			t.Fatalf("waited %v, want 100ms", waited)
		}
		if _, err := (Backoff{}).Wait(ctx, 0, 0); err != context.DeadlineExceeded {
			t.Fatalf("Wait on an ended ctx: err = %v", err)
		}
	})
}

// Many clients that failed at the same instant retry spread over the
// whole jitter window rather than together: the point of full jitter.
func TestWaitSpreadsSimultaneousRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const clients = 1000
		b := Backoff{Rand: seeded(4)}
		start := time.Now()
		var mu sync.Mutex
		var quarters [4]int
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				if _, err := b.Wait(context.Background(), 3, 0); err != nil {
					t.Error(err)
				}
				q := int(time.Since(start) * 4 / b.Ceiling(3))
				mu.Lock()
				quarters[q]++
				mu.Unlock()
			})
		}
		wg.Wait()
		for q, n := range quarters {
			if n < clients/4*80/100 || n > clients/4*120/100 {
				t.Errorf("quarter %d of the 4s window: %d of %d retries, want about %d", q, n, clients, clients/4)
			}
		}
	})
}

type recordingClock struct{ waits []time.Duration }

func (c *recordingClock) After(d time.Duration) <-chan time.Time {
	c.waits = append(c.waits, d)
	ch := make(chan time.Time, 1)
	ch <- time.Time{}
	return ch
}

func TestWaitUsesTheInjectedClock(t *testing.T) {
	clock := &recordingClock{}
	b := Backoff{Config: Config{Base: time.Second, Cap: time.Minute}, Rand: func(n int64) int64 { return n / 2 }, Clock: clock}
	for n := range 3 {
		if _, err := b.Wait(context.Background(), n, 0); err != nil {
			t.Fatal(err)
		}
	}
	want := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second}
	if len(clock.waits) != len(want) {
		t.Fatalf("waits %v, want %v", clock.waits, want)
	}
	for i := range want {
		if clock.waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", clock.waits, want)
		}
	}
}

func TestConfig(t *testing.T) {
	if d := (Config{}).WithDefaults(); d.Base != DefaultBase || d.Cap != DefaultCap || d.MaxRetries != DefaultMaxRetries {
		t.Errorf("defaults = %+v", d)
	}
	for cfg, want := range map[Config]int{{}: 6, {MaxRetries: 2}: 2, {MaxRetries: -1}: 0} {
		if got := cfg.Retries(); got != want {
			t.Errorf("%+v.Retries() = %d, want %d", cfg, got, want)
		}
	}
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, ""},
		{Config{Base: time.Second, Cap: time.Second}, ""},
		{Config{Base: -1}, "retry.base:"},
		{Config{Cap: -1}, "retry.cap:"},
		{Config{Base: 10 * time.Second}, "retry.cap:"},
		{Config{Base: time.Second, Cap: 100 * time.Millisecond}, "retry.cap:"},
	} {
		err := tc.cfg.Validate("retry")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.cfg, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%+v: err %v, want one naming %s", tc.cfg, err, tc.want)
		}
	}
}

// Rerun starts a run that failed again after the drawn delays, which
// grow with the failures in a row and start over after a run that got
// going; it stops when ctx ends, also during a wait.
func TestRerun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := Backoff{Config: Config{Base: time.Second, Cap: 4 * time.Second}, Rand: func(n int64) int64 { return n - 1 }}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		start := time.Now()
		var starts, delays []time.Duration
		done := make(chan struct{})
		go func() {
			defer close(done)
			b.Rerun(ctx, func(context.Context) (bool, error) {
				starts = append(starts, time.Since(start))
				// The fifth run got going before it failed.
				return len(starts) == 5, errors.New("watch closed")
			}, func(err error, d time.Duration) {
				delays = append(delays, d)
			})
		}()
		time.Sleep(15 * time.Second)
		synctest.Wait()
		wantDelays := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second, time.Second, 2 * time.Second, 4 * time.Second}
		var wantStarts []time.Duration
		at := time.Duration(0)
		for i := range 7 {
			wantStarts = append(wantStarts, at)
			wantDelays[i]--
			at += wantDelays[i]
		}
		if !slices.Equal(starts, wantStarts) || !slices.Equal(delays, wantDelays) {
			t.Fatalf("started at %v after delays %v, want %v after %v", starts, delays, wantStarts, wantDelays)
		}
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Rerun still waits after ctx ended")
		}
		if len(starts) != 7 {
			t.Fatalf("started again after ctx ended: %v", starts)
		}
	})
}

// A run that returns because ctx ended is not started again, nor waited
// for.
func TestRerunStopsWithCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	runs := 0
	Backoff{}.Rerun(ctx, func(context.Context) (bool, error) {
		runs++
		cancel()
		return true, nil
	}, func(error, time.Duration) { t.Error("retrying after ctx ended") })
	if runs != 1 {
		t.Fatalf("%d runs, want 1", runs)
	}
}

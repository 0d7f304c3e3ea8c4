package quota

import (
	"math"
	"testing"
	"testing/synctest"
	"time"
)

// Over any interval a bucket lets through at most burst + rate·T.
func TestBucketHoldsItsRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(time.Now(), 120, 2) // 2 per second, 2 at once
		admitted := 0
		for range 1000 { // 10 seconds in 10ms steps, always asking
			for {
				ok, wait := b.Take(time.Now(), 1)
				if !ok {
					if wait <= 0 || wait > 500*time.Millisecond {
						t.Fatalf("wait %v", wait)
					}
					break
				}
				admitted++
			}
			time.Sleep(10 * time.Millisecond)
		}
		if admitted < 20 || admitted > 22 {
			t.Fatalf("admitted %d in 10s at 2/s with a burst of 2", admitted)
		}
	})
}

func TestBucketDebt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(time.Now(), 600, 10) // 10 tokens a second
		if ok, _ := b.Positive(time.Now()); !ok {
			t.Fatal("full bucket refused")
		}
		b.Debit(time.Now(), 40) // a call used 40: 30 in debt
		ok, wait := b.Positive(time.Now())
		if ok || wait < 3*time.Second || wait > 3*time.Second+time.Millisecond {
			t.Fatalf("positive = %v, wait %v; want a 3s wait", ok, wait)
		}
		time.Sleep(wait)
		if ok, _ := b.Positive(time.Now()); !ok {
			t.Fatal("still refused after the debt was paid")
		}
	})
}

func TestBucketRateChangeKeepsBalance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBucket(time.Now(), 60, 5)
		b.SetRate(time.Now(), 0, 5)
		if ok, wait := b.Take(time.Now(), 5); !ok {
			t.Fatalf("balance lost on a rate change (%v)", wait)
		}
		if ok, wait := b.Take(time.Now(), 1); ok || wait != time.Duration(math.MaxInt64) {
			t.Fatalf("a zero rate refills: %v %v", ok, wait)
		}
	})
}

func TestAllocate(t *testing.T) {
	sum := func(m map[string]float64) (s float64) {
		for _, v := range m {
			s += v
		}
		return s
	}
	// Saturated: even shares, whatever the demands.
	got := Allocate(90, map[string]float64{"a": 3000, "b": 1000, "c": 200})
	for n, s := range got {
		if math.Abs(s-30) > 1e-9 {
			t.Fatalf("saturated %s: %v, want an even 30 (%v)", n, s, got)
		}
	}
	// One node wants little: it gets that, the others split the rest.
	got = Allocate(100, map[string]float64{"a": 500, "b": 500, "c": 10})
	if math.Abs(sum(got)-100) > 1e-9 || math.Abs(got["c"]-10) > 1e-9 || math.Abs(got["a"]-45) > 1e-9 {
		t.Fatalf("shares %v", got)
	}
	// Demand below the limit: the rest is spread evenly; nobody starves.
	got = Allocate(100, map[string]float64{"a": 30, "b": 0})
	if math.Abs(sum(got)-100) > 1e-9 || got["b"] <= 0 || got["a"] < 30 {
		t.Fatalf("shares %v", got)
	}
	if Allocate(10, nil) != nil {
		t.Fatal("shares without nodes")
	}
}

func TestMeterSmooths(t *testing.T) {
	var m Meter
	m.Add(10)
	if r := m.Roll(1); r != 600 {
		t.Fatalf("first rate %v", r)
	}
	if r := m.Roll(1); r != 300 {
		t.Fatalf("a quiet second halves the rate: %v", r)
	}
}

// The budget holds retries to ratio × requests + min over its sliding
// window, and forgets what left the window.
func TestBudgetWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(BudgetConfig{Ratio: 0.2, Window: 10 * time.Second, MinRetries: 1})
		for range 50 {
			b.Request(time.Now())
		}
		allowed := 0
		for range 100 {
			if b.Retry(time.Now()) {
				allowed++
			}
		}
		if allowed != 11 { // 0.2·50 + 1
			t.Fatalf("allowed %d retries for 50 requests", allowed)
		}
		time.Sleep(5 * time.Second)
		if b.Retry(time.Now()) {
			t.Fatal("budget refilled inside the window")
		}
		time.Sleep(5 * time.Second)
		if q, r := b.Counts(time.Now()); q != 0 || r != 0 {
			t.Fatalf("after the window: %d requests, %d retries", q, r)
		}
		if !b.Retry(time.Now()) {
			t.Fatal("min_retries not available to a quiet worker")
		}
		if b.Retry(time.Now()) {
			t.Fatal("more than min_retries without requests")
		}
	})
}

// On a quiet worker the default budget gives one request its whole retry
// depth (6, retry.max_retries) and a second unlucky request some more;
// only retries beyond the reserve need requests, a fifth of them each.
func TestBudgetDefaultsLetAQuietWorkerRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := NewBudget(BudgetConfig{})
		b.Request(time.Now())
		for i := range 6 {
			if !b.Retry(time.Now()) {
				t.Fatalf("retry %d of a lone request refused", i+1)
			}
			time.Sleep(time.Second)
		}
		b.Request(time.Now())
		for range 4 {
			if !b.Retry(time.Now()) {
				t.Fatal("a second request's retries refused within the reserve")
			}
		}
		if b.Retry(time.Now()) {
			t.Fatal("past the reserve with 2 requests: 0.2·2 + 10 = 10.4")
		}
		// Under load the ratio takes over: 100 requests allow 20 more.
		for range 100 {
			b.Request(time.Now())
		}
		allowed := 0
		for range 50 {
			if b.Retry(time.Now()) {
				allowed++
			}
		}
		if allowed != 20 {
			t.Fatalf("%d retries allowed for 100 more requests, want 20", allowed)
		}
	})
}

func TestBudgetOff(t *testing.T) {
	b := NewBudget(BudgetConfig{Ratio: -1})
	for range 10 {
		if !b.Retry(time.Now()) {
			t.Fatal("a disabled budget refused")
		}
	}
}

func TestValidate(t *testing.T) {
	if err := (Limit{RPM: -1}).Validate("p.rate_limit"); err == nil {
		t.Error("negative rpm")
	}
	if err := (BudgetConfig{Window: time.Millisecond}).Validate("p.retry_budget"); err == nil {
		t.Error("tiny window")
	}
	if w := (Limit{MaxWait: -1}).Wait(); w != 0 {
		t.Errorf("negative max_wait waits %v", w)
	}
	if b := (Limit{}).BurstOf(6); b != 1 {
		t.Errorf("burst below one request: %v", b)
	}
}

package apikeys

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relaydev/relay/relay/backoff"
	"github.com/relaydev/relay/relay/provider"
)

// scripted answers the checks of each key with its list of states in
// turn, the last one for ever after, and logs what was reported.
type scripted struct {
	mu      sync.Mutex
	answers map[string][]State
	checks  []string
	reports []string
}

func (s *scripted) check(_ context.Context, key string) Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, key)
	a := s.answers[key]
	st := a[0]
	if len(a) > 1 {
		s.answers[key] = a[1:]
	}
	return Result{State: st, Reason: "scripted", At: time.Now()}
}

func (s *scripted) report(st KeyStatus, before State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reports = append(s.reports, fmt.Sprintf("%d:%s->%s", st.Index, before, st.State))
}

func (s *scripted) got() (checks, reports []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.checks), slices.Clone(s.reports)
}

func TestVerifierRetriesWhatItCannotTell(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRing(t, provider.Config{Name: "p", APIKeys: []string{"a", "b"}})
		s := &scripted{answers: map[string][]State{"a": {Verified}, "b": {Pending, Pending, Failed}}}
		v := NewVerifier(r, s.check, s.report)
		// The longest delay a draw allows: 1s-1ns, then 2s-1ns.
		v.Backoff = backoff.Backoff{Config: backoff.Config{Base: time.Second, Cap: 4 * time.Second}, Rand: func(n int64) int64 { return n - 1 }}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			v.Run(ctx)
		}()
		<-v.Ready()
		synctest.Wait()
		if checks, _ := s.got(); !slices.Equal(checks, []string{"a", "b"}) {
			t.Fatalf("checks of the first round = %q", checks)
		}
		time.Sleep(time.Second - 2*time.Nanosecond)
		synctest.Wait()
		if checks, _ := s.got(); len(checks) != 2 {
			t.Fatalf("checked again before the backoff: %q", checks)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if checks, _ := s.got(); len(checks) != 3 {
			t.Fatalf("not checked again after the backoff: %q", checks)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		checks, reports := s.got()
		if !slices.Equal(checks, []string{"a", "b", "b", "b"}) {
			t.Fatalf("checks = %q, want b retried twice, a never again", checks)
		}
		want := []string{"0:->verified", "1:->pending", "1:pending->pending", "1:pending->failed"}
		if !slices.Equal(reports, want) {
			t.Fatalf("reports = %q, want %q", reports, want)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if checks, _ := s.got(); len(checks) != 4 {
			t.Fatalf("settled keys were checked again: %q", checks)
		}
		if k := r.Key(); k != "a" {
			t.Fatalf("Key() = %q", k)
		}
		cancel()
		<-done
	})
}

func TestVerifierChecksAKeyAddedToTheFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "keys")
		writeKeys(t, path, "good")
		r := newRing(t, provider.Config{Name: "p", APIKeysFile: path})
		s := &scripted{answers: map[string][]State{"good": {Verified}, "bad": {Failed}}}
		v := NewVerifier(r, s.check, s.report)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			v.Run(ctx)
		}()
		synctest.Wait()
		writeKeys(t, path, "bad", "good")
		if _, err := r.Reload(false); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		checks, reports := s.got()
		if !slices.Equal(checks, []string{"good", "bad"}) || !slices.Equal(reports, []string{"0:->verified", "0:->failed"}) {
			t.Fatalf("checks %q, reports %q: the new key was not checked at once", checks, reports)
		}
		if k := r.Key(); k != "good" {
			t.Fatalf("Key() = %q, want good: bad was refused", k)
		}
		st := r.Status()
		if st[0].State != Failed || st[0].Reason != "scripted" || st[1].State != Verified {
			t.Fatalf("status = %+v", st)
		}
		cancel()
		<-done
	})
}

package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relaydev/relay/relay/chunklog"
)

func TestRetrier(t *testing.T) {
	errDown := errors.New("nats: connection down")
	for _, tc := range []struct {
		name      string
		bound     time.Duration
		failures  int   // failures before success; -1: always
		err       error // what op fails with
		wantTries int   // 0: any number
		wantErr   error // nil: success
		// minTime and maxTime bound how long do takes.
		minTime, maxTime time.Duration
	}{
		{"transient failures are retried", 30 * time.Second, 3, errDown, 4, nil, 0, 10 * time.Second},
		{"fenced is final", 30 * time.Second, -1, fmt.Errorf("append: %w", chunklog.ErrFenced), 1, chunklog.ErrFenced, 0, 0},
		{"no retry when the bound is negative", -1, -1, errDown, 1, errDown, 0, 0},
		{"gives up after the bound", 30 * time.Second, -1, errDown, 0, errDown, 30 * time.Second, 31 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := retrier{bound: tc.bound, log: slog.New(slog.DiscardHandler)}
				tries := 0
				began := time.Now()
				err := r.do(context.Background(), "op", func(context.Context) error {
					tries++
					if tc.failures < 0 || tries <= tc.failures {
						return tc.err
					}
					return nil
				})
				took := time.Since(began)
				switch {
				case tc.wantErr == nil && err != nil, tc.wantErr != nil && !errors.Is(err, tc.wantErr):
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				case tc.wantTries > 0 && tries != tc.wantTries:
					t.Fatalf("%d tries, want %d", tries, tc.wantTries)
				case took < tc.minTime || took > tc.maxTime:
					t.Fatalf("took %v, want between %v and %v", took, tc.minTime, tc.maxTime)
				}
			})
		})
	}
}

package backoff_test

import (
	"fmt"
	"time"

	"github.com/relaydev/relay/relay/backoff"
)

func ExampleBackoff_Delay() {
	b := backoff.Backoff{
		Config: backoff.Config{Base: 500 * time.Millisecond, Cap: 8 * time.Second},
		// The top of each interval, to show the ceilings; the default draws
		// uniformly below them.
		Rand: func(n int64) int64 { return n - 1 },
	}
	for n := range 6 {
		fmt.Println(b.Delay(n, 0).Round(time.Millisecond))
	}
	// A provider's Retry-After is a floor under the drawn delay.
	fmt.Println(b.Delay(0, 2*time.Second))
	// Output:
	// 500ms
	// 1s
	// 2s
	// 4s
	// 8s
	// 8s
	// 2s
}

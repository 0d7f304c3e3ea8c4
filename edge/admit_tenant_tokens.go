package edge

import (
	"sync"
	"time"

	"github.com/relaydev/relay/relay/fleet"
	"github.com/relaydev/relay/relay/wire"
)

// tokenDebts are the tokens per minute reserved for the generations this
// edge started (fleet.TenantLimiter.Reserve), until a client here is sent
// the generation's end frame and its usage pays them (Settle). A
// generation whose end no client here saw stays counted at its estimate,
// the tenant's mean cost, and is forgotten after debtsKept.
type tokenDebts struct {
	limiter *fleet.TenantLimiter

	mu    sync.Mutex
	debts map[string]tokenDebt // by stream id
}

type tokenDebt struct {
	tenant   string
	reserved float64
	at       time.Time
}

// debtsKept bounds how long a reservation waits for its generation's end.
const debtsKept = time.Hour

func newTokenDebts(l *fleet.TenantLimiter) *tokenDebts {
	return &tokenDebts{limiter: l, debts: map[string]tokenDebt{}}
}

// reserve admits generation id of tenant against its tokens per minute,
// or returns its 429.
func (d *tokenDebts) reserve(tenant, id string) *wire.Error {
	ok, wait, reserved := d.limiter.Reserve(tenant)
	if !ok {
		return &wire.Error{
			Message:      "Rate limit reached for tokens of this API key; retry in " + wait.Round(time.Second).String() + ".",
			Type:         "tokens",
			Code:         CodeRateLimited,
			Status:       429,
			RetryAfterMS: wait.Milliseconds(),
		}
	}
	if reserved > 0 {
		d.mu.Lock()
		d.debts[id] = tokenDebt{tenant: tenant, reserved: reserved, at: time.Now()}
		d.mu.Unlock()
	}
	return nil
}

// settle pays generation id's reservation with usage (nil: the generation
// was not queued, or ended without usage).
func (d *tokenDebts) settle(id string, usage *wire.Usage) {
	d.mu.Lock()
	debt, ok := d.debts[id]
	delete(d.debts, id)
	d.mu.Unlock()
	if !ok {
		return
	}
	tokens := 0
	if usage != nil {
		tokens = usage.TotalTokens
	}
	d.limiter.Settle(debt.tenant, debt.reserved, tokens)
}

// expire forgets reservations older than debtsKept.
func (d *tokenDebts) expire(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, debt := range d.debts {
		if now.Sub(debt.at) > debtsKept {
			delete(d.debts, id)
		}
	}
}

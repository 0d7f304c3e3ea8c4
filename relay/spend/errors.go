package spend

import "errors"

// errWatchClosed: the ledger's watch ended by itself (the connection
// closed, the bucket deleted).
var errWatchClosed = errors.New("spend: usage ledger watch closed")

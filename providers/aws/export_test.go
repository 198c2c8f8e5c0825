package aws

import "time"

// SetBatchWindows widens (or narrows) the provider's batch windows, so that a test's
// concurrent calls surely share a batch however loaded the machine is.
func SetBatchWindows(p *Provider, idle, maxWait time.Duration) {
	p.batches.fleets.idle, p.batches.fleets.max = idle, maxWait
	p.batches.describe.idle, p.batches.describe.max = idle, maxWait
	p.batches.terminate.idle, p.batches.terminate.max = idle, maxWait
}

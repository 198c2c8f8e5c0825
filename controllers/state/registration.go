package state

import (
	"sync"
	"time"
)

// Registration outcomes are remembered per NodePool for its NodeRegistrationHealthy
// condition (controllers/nodepool), as upstream's NodePool health state: the lifecycle
// controller records each NodeClaim that registered and each it deleted for not registering
// in time. They live in memory; a new leader starts from the condition the NodePool has.
type registrations struct {
	mu   sync.Mutex
	last map[string]RegistrationOutcome
}

// RegistrationOutcome is the last registration of a NodePool's NodeClaims.
type RegistrationOutcome struct {
	// Failed is true when the NodeClaim did not register in time; Message says which and why.
	Failed  bool
	Message string
	At      time.Time
}

// RecordRegistration remembers a NodePool's latest registration outcome.
func (c *Cluster) RecordRegistration(pool string, failed bool, message string) {
	c.registrations.mu.Lock()
	defer c.registrations.mu.Unlock()
	if c.registrations.last == nil {
		c.registrations.last = map[string]RegistrationOutcome{}
	}
	c.registrations.last[pool] = RegistrationOutcome{Failed: failed, Message: message, At: c.clock.Now()}
}

// LastRegistration is a NodePool's latest registration outcome, if this manager saw one.
func (c *Cluster) LastRegistration(pool string) (RegistrationOutcome, bool) {
	c.registrations.mu.Lock()
	defer c.registrations.mu.Unlock()
	o, ok := c.registrations.last[pool]
	return o, ok
}

// ForgetRegistrations drops a NodePool's outcomes: its template or node class changed, and
// what failed before says nothing of what launches now.
func (c *Cluster) ForgetRegistrations(pool string) {
	c.registrations.mu.Lock()
	defer c.registrations.mu.Unlock()
	delete(c.registrations.last, pool)
}

package kwok

import (
	"context"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// every runs step each tick until ctx ends, logging what it returns as what failed: the loops
// of the simulated cloud that run on the leader (Registrar, Interrupter). It returns nil, as
// controller-runtime wants of a runnable that ends with its context.
func every(ctx context.Context, clk clock.Clock, tick time.Duration, what string, step func(context.Context) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-clk.After(tick):
			if err := step(ctx); err != nil {
				log.FromContext(ctx).Error(err, what)
			}
		}
	}
}

package aws

import (
	"context"
	"sync"
	"testing"
	"time"
)

// recorder is a batch run that records the batches it was given and answers each item with
// its double.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
}

func (r *recorder) run(_ context.Context, items []int) []result[int] {
	r.mu.Lock()
	r.batches = append(r.batches, append([]int(nil), items...))
	r.mu.Unlock()
	out := make([]result[int], len(items))
	for i, v := range items {
		out[i].out = 2 * v
	}
	return out
}

func TestBatcherGathersRequestsOfOneKey(t *testing.T) {
	rec := &recorder{}
	b := newBatcher(0, rec.run, nil)
	b.idle, b.max = time.Second, time.Hour // a loaded machine still starts the goroutines within the idle window
	var wg sync.WaitGroup
	got := make([]int, 6)
	for i := range 6 {
		key := "even"
		if i%2 == 1 {
			key = "odd"
		}
		wg.Go(func() {
			v, err := b.add(context.Background(), key, i)
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		})
	}
	wg.Wait()
	for i, v := range got {
		if v != 2*i {
			t.Errorf("item %d answered %d, want %d: answers went to the wrong callers", i, v, 2*i)
		}
	}
	if len(rec.batches) != 2 || len(rec.batches[0]) != 3 || len(rec.batches[1]) != 3 {
		t.Errorf("batches %v; want two of three, one per key", rec.batches)
	}
}

func TestBatcherSendsAFullBatchAtOnce(t *testing.T) {
	rec := &recorder{}
	b := newBatcher(2, rec.run, nil)
	b.idle, b.max = time.Hour, time.Hour // only fullness can send these
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if _, err := b.add(context.Background(), "", i); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(rec.batches) != 2 || len(rec.batches[0]) != 2 || len(rec.batches[1]) != 2 {
		t.Errorf("batches %v; want two full batches of two", rec.batches)
	}
}

func TestBatcherSendsAtTheLatestAfterMax(t *testing.T) {
	rec := &recorder{}
	b := newBatcher(0, rec.run, nil)
	b.idle, b.max = time.Hour, 10*time.Millisecond // the idle window never closes: max must
	if v, err := b.add(context.Background(), "", 21); err != nil || v != 42 {
		t.Fatalf("add: %d, %v", v, err)
	}
}

func TestBatcherCallerThatGivesUpDoesNotStopTheBatch(t *testing.T) {
	rec := &recorder{}
	b := newBatcher(0, rec.run, nil)
	b.idle, b.max = 200*time.Millisecond, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.add(ctx, "", 1); err != context.Canceled {
		t.Errorf("a cancelled caller got %v, want context.Canceled", err)
	}
	if v, err := b.add(context.Background(), "", 2); err != nil || v != 4 {
		t.Errorf("the other caller of the batch got %d, %v", v, err)
	}
	if len(rec.batches) != 1 || len(rec.batches[0]) != 2 {
		t.Errorf("batches %v; want one with both items", rec.batches)
	}
}

// Each batch is reported once, with its size and how long its window was open.
func TestBatcherReportsEachBatch(t *testing.T) {
	rec := &recorder{}
	var sizes []int
	var windows []time.Duration
	var mu sync.Mutex
	b := newBatcher(0, rec.run, func(n int, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		sizes, windows = append(sizes, n), append(windows, d)
	})
	b.idle, b.max = 50*time.Millisecond, time.Second
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() { _, _ = b.add(context.Background(), "k", i) })
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 1 || sizes[0] != 3 || windows[0] < b.idle {
		t.Fatalf("batches reported %v with windows %v; want one of 3, open at least the idle window", sizes, windows)
	}
}

func TestLaunchFailureReason(t *testing.T) {
	for code, want := range map[string]string{
		"InsufficientInstanceCapacity":                      "LaunchFailed",
		"VcpuLimitExceeded":                                 "VCPULimitExceeded",
		"MaxSpotInstanceCountExceeded":                      "SpotQuotaExceeded",
		"UnauthorizedOperation":                             "Unauthorized",
		"AuthFailure.ServiceLinkedRoleCreationNotPermitted": "SpotSLRCreationFailed",
		"InvalidAMIID.NotFound":                             "AMINotFound",
		"InsufficientFreeAddressesInSubnet":                 "InsufficientFreeAddressesInSubnet",
	} {
		if got := launchFailureReason(code, "message"); got != want {
			t.Errorf("%s: %s, want %s", code, got, want)
		}
	}
}

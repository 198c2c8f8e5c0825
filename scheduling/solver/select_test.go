package solver

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// selectFirst puts the k smallest first, whatever the input's order, size and duplicates.
func TestSelectFirst(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cmp := func(a, b int) int { return a - b }
	for range 2000 {
		n := rng.IntN(200) + 1
		s := make([]int, n)
		for i := range s {
			s[i] = rng.IntN(n)
		}
		k := rng.IntN(n) + 1
		want := slices.Clone(s)
		slices.Sort(want)
		selectFirst(s, k, cmp)
		got := slices.Clone(s[:k])
		slices.Sort(got)
		if !slices.Equal(got, want[:k]) {
			t.Fatalf("n=%d k=%d: first %v, want %v", n, k, got, want[:k])
		}
	}
}

package host

import (
	"slices"
	"testing"
)

func TestCoalesce(t *testing.T) {
	tests := []struct {
		name string
		in   segments
		max  int
		want segments
	}{
		{"under the cap", segments{{0, 1}, {10, 1}}, 2, segments{{0, 1}, {10, 1}}},
		{"smallest gap merged", segments{{0, 1}, {10, 1}, {12, 1}, {100, 1}}, 3, segments{{0, 1}, {10, 3}, {100, 1}}},
		{"ties merged left to right", segments{{0, 1}, {2, 1}, {4, 1}, {6, 1}}, 2, segments{{0, 5}, {6, 1}}},
		{"down to one", segments{{0, 1}, {5, 1}, {50, 2}}, 1, segments{{0, 52}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := coalesce(slices.Clone(tc.in), tc.max)
			if !slices.Equal(got, tc.want) {
				t.Errorf("coalesce(%v, %d) = %v, want %v", tc.in, tc.max, got, tc.want)
			}
			// Every byte of data is still archived.
			for _, s := range tc.in {
				if !slices.ContainsFunc(got, func(g segment) bool { return g.off <= s.off && s.off+s.len <= g.off+g.len }) {
					t.Errorf("segment %v is not covered by %v", s, got)
				}
			}
		})
	}
}

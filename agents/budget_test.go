package agents_test

import (
	"errors"
	"testing"

	"github.com/troupe-dev/troupe/agents"
)

func TestBudgetChange(t *testing.T) {
	base := agents.Budget{Cost: 1, ModelCalls: 10}
	tests := []struct {
		arg     string
		want    agents.Budget
		wantErr bool
	}{
		{arg: "cost=2.5", want: agents.Budget{Cost: 2.5, ModelCalls: 10}},
		{arg: "model_calls=0, input_tokens=5000", want: agents.Budget{Cost: 1, InputTokens: 5000}},
		{arg: "output_tokens=7 cost=0", want: agents.Budget{ModelCalls: 10, OutputTokens: 7}},
		{arg: "off", want: agents.Budget{}},
		{arg: "", wantErr: true},
		{arg: "cost", wantErr: true},
		{arg: "cost=lots", wantErr: true},
		{arg: "dollars=3", wantErr: true},
		{arg: "model_calls=-1", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.arg, func(t *testing.T) {
			got, err := base.Change(tc.arg)
			if tc.wantErr {
				if !errors.Is(err, agents.ErrInvalidBudget) {
					t.Errorf("Change(%q) = %+v, %v; want ErrInvalidBudget", tc.arg, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("Change(%q) = %+v, %v; want %+v", tc.arg, got, err, tc.want)
			}
			if back, err := (agents.Budget{}).Change(got.String()); err != nil || back != got {
				t.Errorf("String %q reads back as %+v, %v", got.String(), back, err)
			}
		})
	}
}

func TestGraphBudgetAndPrices(t *testing.T) {
	g := agents.MustGraph("g", "a", &agents.Agent{Name: "a"})
	if g.Budget() != nil || g.Prices() != nil {
		t.Fatal("a new graph has a budget or prices")
	}
	prices := agents.Prices{"m": {InputPerMTok: 1, OutputPerMTok: 2}}
	h := g.WithBudget(agents.Budget{Cost: 3}).WithPrices(prices)
	prices["m"] = agents.Price{}
	if g.Budget() != nil || h.Budget().Cost != 3 || h.Prices()["m"].OutputPerMTok != 2 || h.Entry() != "a" {
		t.Errorf("WithBudget and WithPrices: %+v %+v (the original: %+v)", h.Budget(), h.Prices(), g.Budget())
	}
	if err := (agents.Prices{"m": {InputPerMTok: -1}}).Check(); !errors.Is(err, agents.ErrInvalidBudget) {
		t.Errorf("a negative price: %v", err)
	}
}

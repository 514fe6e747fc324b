package main

import (
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/examples/internal/subcmd/subcmdtest"
	"github.com/spindle-ps/spindle/examples/lr/lr"
	"github.com/spindle-ps/spindle/psnode/store"
)

// TestUpdaterFlags: --updater selects every updater of the store, with
// its own flags; an unknown updater, or a flag the chosen one does not
// take, is an error naming the flag.
func TestUpdaterFlags(t *testing.T) {
	t.Parallel()
	def := lr.DefaultFTRLParams()
	tests := []struct {
		name string
		args []string
		want store.Updater[float32] // nil: an error
		err  string
	}{
		{"default ftrl", nil, store.FTRL[float32]{Alpha: def["alpha"], Beta: def["beta"], L1: def["l1"], L2: def["l2"]}, ""},
		{"sum", []string{"--updater", "sum"}, store.Sum[float32]{}, ""},
		{"sgd", []string{"--updater", "sgd", "--lr", "0.2"}, store.SGD[float32]{LR: 0.2, L2: def["l2"]}, ""},
		{"adagrad eps", []string{"--updater", "adagrad", "--eps", "1e-6", "--l2", "0"}, store.AdaGrad[float32]{LR: 0.05, Eps: 1e-6}, ""},
		{"adam defaults", []string{"--updater", "adam"}, store.DefaultAdam[float32](), ""},
		{"adam flags", []string{"--updater", "adam", "--lr", "0.01", "--beta1", "0.8", "--beta2", "0.99", "--eps", "1e-7"}, store.Adam[float32]{LR: 0.01, Beta1: 0.8, Beta2: 0.99, Eps: 1e-7}, ""},
		{"unknown", []string{"--updater", "rmsprop"}, nil, `--updater "rmsprop": want one of adagrad, adam, ftrl, sgd, sum`},
		{"flag of another updater", []string{"--updater", "adam", "--alpha", "0.3"}, nil, "--alpha: the adam updater does not take it"},
		{"out of range", []string{"--updater", "adam", "--beta1", "1"}, nil, "--updater adam: store: invalid configuration: adam beta1 = 1, want < 1"},
		{"model format", []string{"--model-format", "csv"}, nil, `--model-format "csv": want text or binary`},
		{"significance without a free mode", []string{"--significance", "0.5"}, nil, "--significance 0.5: needs --async or --staleness"},
		{"negative significance", []string{"--async", "--significance", "-1"}, nil, "--significance -1: want a finite number >= 0"},
		{"kkt without a free mode", []string{"--kkt", "0.1"}, nil, "--kkt 0.1: needs --async or --staleness"},
		{"kkt without l1", []string{"--async", "--kkt", "0.1", "--updater", "adam"}, nil, "--kkt 0.1: needs --updater ftrl with --l1 > 0 (have --updater adam"},
		{"kkt not finite", []string{"--async", "--kkt", "NaN"}, nil, "--kkt NaN: want a finite number >= 0"},
		{"negative cache", []string{"--cache-mb", "-2"}, nil, "--cache-mb -2: want -1 (a quarter of the worker's memory) or 0 to 1048576"},
		{"unknown format", []string{"--format", "tsv"}, nil, `--format "tsv": want libsvm or csv`},
		{"header without csv", []string{"--csv-header"}, nil, "--csv-header: only with --format csv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := parseTrainFlags(tt.args)
			if tt.want == nil {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("error %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			u, err := f.newUpdater()
			if err != nil || u != tt.want {
				t.Errorf("updater %#v (%v), want %#v", u, err, tt.want)
			}
		})
	}
}

// TestHelp: -h says how ps-lr and its subcommands are called, then the
// flags.
func TestHelp(t *testing.T) { subcmdtest.Help(t, psLR, "ps-lr", "gen", "eval") }

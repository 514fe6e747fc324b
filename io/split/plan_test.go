package split_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/split"
)

func TestPlan(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	files := map[string]int{
		"in/a.txt":       25,
		"in/b.txt":       10,
		"in/empty.txt":   0,
		"in/_SUCCESS":    0,
		"in/.a.txt.crc":  8,
		"in/_tmp":        5,
		"logs/d1/x.log":  12,
		"logs/d2/y.log":  7,
		"logs/d2/_z.log": 7,
		"logs/top.log":   3,
		"z/data.gz":      40,
		"z/data.bz2":     40,
		"nested/sub/f":   4,
		"nested/g":       4,
		"emptydir/.keep": 1,
	}
	for name, size := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Repeat("x", size)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := dfs.NewResolver(conf.HadoopConf{}, "u")
	t.Cleanup(func() { r.Close() })
	uri := func(name string) string { return "file://" + filepath.Join(root, name) }
	at := func(name string) string { return filepath.Join(root, name) }

	type sp struct {
		name          string
		start, length int64
		gz            bool
	}
	tests := []struct {
		name    string
		inputs  []string
		size    int64
		want    []sp
		wantErr string
	}{
		{
			name:   "a file",
			inputs: []string{at("in/a.txt")},
			size:   10,
			want:   []sp{{"in/a.txt", 0, 10, false}, {"in/a.txt", 10, 10, false}, {"in/a.txt", 20, 5, false}},
		},
		{
			name:   "a directory skips hidden and empty files",
			inputs: []string{uri("in")},
			size:   10,
			want:   []sp{{"in/a.txt", 0, 10, false}, {"in/a.txt", 10, 10, false}, {"in/a.txt", 20, 5, false}, {"in/b.txt", 0, 10, false}},
		},
		{
			name:   "a glob over directories, sorted, deduplicated",
			inputs: []string{at("logs/*/*.log"), at("logs/d1/x.log"), at("logs/d*")},
			size:   100,
			want:   []sp{{"logs/d1/x.log", 0, 12, false}, {"logs/d2/y.log", 0, 7, false}},
		},
		{
			name:   "a glob naming hidden files keeps them",
			inputs: []string{at("in/_*")},
			size:   100,
			want:   []sp{{"in/_tmp", 0, 5, false}},
		},
		{
			name:   "split size 0 is the block size",
			inputs: []string{at("in/a.txt")},
			size:   0,
			want:   []sp{{"in/a.txt", 0, 25, false}},
		},
		{
			name:   "gzip is one split",
			inputs: []string{at("z/*.gz")},
			size:   7,
			want:   []sp{{"z/data.gz", 0, 40, true}},
		},
		{name: "other codecs are refused", inputs: []string{at("z/data.bz2")}, size: 7, wantErr: ".bz2 compression"},
		{name: "missing file", inputs: []string{at("in/a.txt"), at("nope.txt")}, size: 7, wantErr: "nope.txt"},
		{name: "glob matching nothing", inputs: []string{at("in/*.csv")}, size: 7, wantErr: "in/*.csv"},
		{name: "glob matching only hidden files", inputs: []string{at("logs/d2/_*.nope")}, size: 7, wantErr: "matches no file"},
		{name: "directory with only hidden files", inputs: []string{at("emptydir")}, size: 7, wantErr: "emptydir"},
		{name: "subdirectory of an input directory", inputs: []string{at("nested")}, size: 7, wantErr: "is a directory"},
		{name: "negative size", inputs: []string{at("in")}, size: -1, wantErr: "negative"},
		{name: "no inputs", inputs: nil, size: 7, wantErr: "no inputs"},
		{name: "bad glob", inputs: []string{at("in/[")}, size: 7, wantErr: "syntax error in pattern"},
		{name: "unsupported scheme", inputs: []string{"s3a://b/k"}, size: 7, wantErr: "unsupported scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := split.Plan(context.Background(), r, tt.inputs, tt.size)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(tt.name, "nothing") || strings.Contains(tt.name, "missing") {
					if !errors.Is(err, split.ErrNoMatch) {
						t.Errorf("err %v does not wrap ErrNoMatch", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want []split.Split
			for _, w := range tt.want {
				want = append(want, split.Split{URI: uri(w.name), Start: w.start, Length: w.length, FileSize: int64(files[w.name]), Compressed: w.gz})
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %v\nwant %v", got, want)
			}
		})
	}
}

func TestPlanBoundsTheNumberOfSplits(t *testing.T) {
	t.Parallel()
	m := memFS{files: map[string][]byte{"big": make([]byte, split.MaxSplits+1)}}
	if _, err := split.Plan(context.Background(), m, []string{"mem://big"}, 1); err == nil || !strings.Contains(err.Error(), "splits") {
		t.Fatalf("err = %v", err)
	}
}

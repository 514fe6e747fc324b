package records_test

import (
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/io/records"
)

func TestParseLibSVM(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    records.Example
		wantErr string
	}{
		{name: "sorted", in: "1 3:0.5 7:2", want: records.Example{Label: 1, Keys: []uint64{3, 7}, Vals: []float32{0.5, 2}}},
		{name: "unsorted", in: "0 9:1 2:2 5:3", want: records.Example{Label: 0, Keys: []uint64{2, 5, 9}, Vals: []float32{2, 3, 1}}},
		{name: "minus one", in: "-1 1:1", want: records.Example{Label: 0, Keys: []uint64{1}, Vals: []float32{1}}},
		{name: "plus one", in: "+1 1:1", want: records.Example{Label: 1, Keys: []uint64{1}, Vals: []float32{1}}},
		{name: "float labels", in: "1.0 0:1e-3", want: records.Example{Label: 1, Keys: []uint64{0}, Vals: []float32{1e-3}}},
		{name: "no features", in: "1", want: records.Example{Label: 1}},
		{name: "spaces and tabs", in: " \t1\t4:-2.5   8:3 \r", want: records.Example{Label: 1, Keys: []uint64{4, 8}, Vals: []float32{-2.5, 3}}},
		{name: "max index", in: "0 18446744073709551615:1", want: records.Example{Keys: []uint64{math.MaxUint64}, Vals: []float32{1}}},
		{name: "empty", in: "  ", wantErr: "empty record"},
		{name: "label 2", in: "2 1:1", wantErr: "want 0/1 or -1/+1"},
		{name: "label text", in: "yes 1:1", wantErr: "not a number"},
		{name: "no colon", in: "1 3", wantErr: "want index:value"},
		{name: "index overflow", in: "1 18446744073709551616:1", wantErr: "not a uint64"},
		{name: "negative index", in: "1 -3:1", wantErr: "not a uint64"},
		{name: "empty index", in: "1 :1", wantErr: "not a uint64"},
		{name: "empty value", in: "1 3:", wantErr: "not a number"},
		{name: "bad value", in: "1 3:x", wantErr: "not a number"},
		{name: "nan", in: "1 3:NaN", wantErr: "finite"},
		{name: "inf", in: "1 3:-Inf", wantErr: "finite"},
		{name: "float32 overflow", in: "1 3:1e39", wantErr: "finite"},
		{name: "duplicate adjacent", in: "1 3:1 3:2", wantErr: "repeated"},
		{name: "duplicate apart", in: "1 3:1 1:1 3:2", wantErr: "repeated"},
		{name: "qid", in: "1 qid:3 2:1 1:1", want: records.Example{Label: 1, Keys: []uint64{1, 2}, Vals: []float32{1, 1}}},
		{name: "qid alone", in: "0\tqid:18446744073709551615", want: records.Example{}},
		{name: "bad qid", in: "1 qid:x 1:1", wantErr: `query id "qid:x": not a uint64`},
		{name: "qid not first", in: "1 1:1 qid:3", wantErr: "not a uint64"},
		{name: "comment", in: "1 3:0.5 7:2 # id=17 3:9", want: records.Example{Label: 1, Keys: []uint64{3, 7}, Vals: []float32{0.5, 2}}},
		{name: "comment at once", in: "0 3:1#x", want: records.Example{Keys: []uint64{3}, Vals: []float32{1}}},
		{name: "comment only", in: " # 1 3:1", wantErr: "empty record"},
		{name: "weight", in: "1:0.5 3:1", want: records.Example{Label: 1, Weight: 0.5, Keys: []uint64{3}, Vals: []float32{1}}},
		{name: "weight of minus one", in: "-1:2e1 qid:4 3:1", want: records.Example{Weight: 20, Keys: []uint64{3}, Vals: []float32{1}}},
		{name: "weight alone", in: "+1:3", want: records.Example{Label: 1, Weight: 3}},
		{name: "weight zero", in: "1:0 3:1", wantErr: `label "1:0": instance weight: want a positive number`},
		{name: "weight negative", in: "0:-1 3:1", wantErr: `label "0:-1": instance weight: want a positive number`},
		{name: "weight underflows", in: "0:1e-50 3:1", wantErr: "want a positive number"},
		{name: "weight empty", in: "1: 3:1", wantErr: `label "1:": instance weight: value is not a number`},
		{name: "weight inf", in: "1:inf 3:1", wantErr: "finite"},
		{name: "weight twice", in: "1:2:3 3:1", wantErr: "instance weight: value is not a number"},
		{name: "weighted label 2", in: "2:1 3:1", wantErr: "want 0/1 or -1/+1"},
		{name: "label colon text", in: "x:0.5 3:1", wantErr: "not a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ex := records.Example{Keys: []uint64{99}, Vals: []float32{99}, Label: 7, Weight: 7} // reused, reset
			err := records.ParseLibSVM([]byte(tt.in), &ex)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, records.ErrSyntax) {
					t.Fatalf("ParseLibSVM(%q) = %v, want an ErrSyntax containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertExample(t, ex, tt.want)
		})
	}
}

func assertExample(t *testing.T, got, want records.Example) {
	t.Helper()
	if len(got.Keys) == 0 && len(want.Keys) == 0 {
		got.Keys, want.Keys = nil, nil
		got.Vals, want.Vals = nil, nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestParseCSV(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		opts    records.CSVOptions
		want    records.Example
		wantErr string
	}{
		{name: "label first", in: "1,0.5,2", want: records.Example{Label: 1, Keys: []uint64{1, 2}, Vals: []float32{0.5, 2}}},
		{name: "label last", in: "0.5, 2 ,-1", opts: records.CSVOptions{LabelColumn: 2}, want: records.Example{Label: 0, Keys: []uint64{0, 1}, Vals: []float32{0.5, 2}}},
		{name: "label middle", in: "3,+1,4", opts: records.CSVOptions{LabelColumn: 1}, want: records.Example{Label: 1, Keys: []uint64{0, 2}, Vals: []float32{3, 4}}},
		{name: "missing values", in: "1,,7,", want: records.Example{Label: 1, Keys: []uint64{2}, Vals: []float32{7}}},
		{name: "tabs", in: "0\t1\t2", opts: records.CSVOptions{Comma: '\t'}, want: records.Example{Label: 0, Keys: []uint64{1, 2}, Vals: []float32{1, 2}}},
		{name: "only a label", in: "1", want: records.Example{Label: 1}},
		{name: "no label column", in: "1,2", opts: records.CSVOptions{LabelColumn: 5}, wantErr: "no label column 5"},
		{name: "empty label", in: ",2", wantErr: "label column 0 is empty"},
		{name: "header", in: "label,x,y", wantErr: "not a number"},
		{name: "bad value", in: "1,2,abc", wantErr: "column 2"},
		{name: "quoted", in: `1,"2"`, wantErr: "quoted"},
		{name: "nan", in: "1,nan", wantErr: "finite"},
		{name: "bad label", in: "0.5,1", wantErr: "want 0/1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var ex records.Example
			err := records.ParseCSV([]byte(tt.in), tt.opts, &ex)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, records.ErrSyntax) {
					t.Fatalf("ParseCSV(%q) = %v, want an ErrSyntax containing %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertExample(t, ex, tt.want)
		})
	}
}

func TestParsingDoesNotAllocate(t *testing.T) {
	libsvm := []byte("1 3:0.5 17:1.25 4:-3e-2 99999:12345.678 18446744073709551615:1")
	csv := []byte("1,0.5,1.25,-3e-2,,12345.678")
	var ex records.Example
	records.ParseLibSVM(libsvm, &ex) // grow the slices once
	if n := testing.AllocsPerRun(100, func() {
		if err := records.ParseLibSVM(libsvm, &ex); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ParseLibSVM: %v allocations per record", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := records.ParseCSV(csv, records.CSVOptions{}, &ex); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("ParseCSV: %v allocations per record", n)
	}
}

// checkExample checks the invariants of a parsed Example.
func checkExample(t *testing.T, ex *records.Example) {
	t.Helper()
	if ex.Label != 0 && ex.Label != 1 {
		t.Fatalf("label %v", ex.Label)
	}
	if w := float64(ex.Weight); w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
		t.Fatalf("weight %v", w)
	}
	if len(ex.Keys) != len(ex.Vals) {
		t.Fatalf("%d keys, %d values", len(ex.Keys), len(ex.Vals))
	}
	for i := range ex.Keys {
		if i > 0 && ex.Keys[i] <= ex.Keys[i-1] {
			t.Fatalf("keys not strictly increasing: %v", ex.Keys)
		}
		if v := float64(ex.Vals[i]); math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("value %v", v)
		}
	}
}

func FuzzParseLibSVM(f *testing.F) {
	for _, s := range []string{"1 3:0.5 7:2", "0 9:1 2:2 5:3", "-1", "+1 18446744073709551615:1e-30", "1 3:1 3:2", "1 a:b", " \t0\t1:1 \r",
		"1 qid:7 2:1 # c", "1:2 3:1", "0 #", "qid:1", "-1:0.25 qid:2 4:1", "1:0 2:1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var ex records.Example
		if err := records.ParseLibSVM(line, &ex); err != nil {
			if !errors.Is(err, records.ErrSyntax) {
				t.Fatalf("error %v does not wrap ErrSyntax", err)
			}
			return
		}
		checkExample(t, &ex)
		// Written back in canonical form, it parses to the same Example.
		var b strings.Builder
		b.WriteString(strconv.Itoa(int(ex.Label)))
		if ex.Weight != 0 {
			b.WriteString(":" + strconv.FormatFloat(float64(ex.Weight), 'g', -1, 32))
		}
		for i, k := range ex.Keys {
			b.WriteString(" " + strconv.FormatUint(k, 10) + ":" + strconv.FormatFloat(float64(ex.Vals[i]), 'g', -1, 32))
		}
		var again records.Example
		if err := records.ParseLibSVM([]byte(b.String()), &again); err != nil {
			t.Fatalf("canonical form %q: %v", b.String(), err)
		}
		assertExample(t, again, ex)
	})
}

func FuzzParseCSV(f *testing.F) {
	for _, s := range []string{"1,0.5,2", "0.5,2,-1", "1,,7,", `1,"2"`, ",", "1"} {
		f.Add([]byte(s), uint8(0))
	}
	f.Fuzz(func(t *testing.T, line []byte, labelCol uint8) {
		var ex records.Example
		opts := records.CSVOptions{LabelColumn: int(labelCol % 8)}
		if err := records.ParseCSV(line, opts, &ex); err != nil {
			if !errors.Is(err, records.ErrSyntax) {
				t.Fatalf("error %v does not wrap ErrSyntax", err)
			}
			return
		}
		checkExample(t, &ex)
		for _, k := range ex.Keys {
			if k == uint64(opts.LabelColumn) {
				t.Fatalf("the label column %d is also a feature", k)
			}
		}
	})
}

// BenchmarkParseLibSVM: a line of mixed values and unsorted keys, and
// one like ps-lr gen's (sorted keys, every value 1).
func BenchmarkParseLibSVM(b *testing.B) {
	for _, tc := range []struct{ name, line string }{
		{"mixed", "1 3:0.5 17:1.25 4:-3e-2 99999:12345.678 123456789:1 42:0.001 7:7 8:8 9:9 10:10"},
		{"gen", "0 1:1 2:1 3:1 5:1 8:1 9:1 11:1 20:1 29:1 51:1 56:1 101:1 151:1 181:1 335:1 447:1 865:1 1140:1 1214:1 1297:1 1534:1 4846:1 5257:1 6093:1 6508:1 16230:1 16869:1 66000:1 102420:1 146915:1 417927:1"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			line := []byte(tc.line)
			var ex records.Example
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				if err := records.ParseLibSVM(line, &ex); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

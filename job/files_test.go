package job

import "testing"

// TestBesideDir: the directory beside an output, for paths and URIs, and
// none beside a root.
func TestBesideDir(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ dir, want string }{
		{"/tmp/model", "/tmp/.model.spindle-new"},
		{"/tmp/model/", "/tmp/.model.spindle-new"},
		{"model", ".model.spindle-new"},
		{"hdfs://nn:8020/models/lr", "hdfs://nn:8020/models/.lr.spindle-new"},
		{"hdfs:///lr", "hdfs:///.lr.spindle-new"},
		{"file:///tmp/m", "file:///tmp/.m.spindle-new"},
		{"/", ""},
		{"", ""},
		{".", ""},
		{"/tmp/..", ""},
		{"hdfs://nn:8020", ""},
		{"hdfs://nn:8020/", ""},
		{"hdfs:///", ""},
	} {
		got, ok := besideDir(tt.dir, stageSuffix)
		if got != tt.want || ok != (tt.want != "") {
			t.Errorf("besideDir(%q) = %q, %v; want %q", tt.dir, got, ok, tt.want)
		}
	}
}

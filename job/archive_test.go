package job

import (
	"strings"
	"testing"
)

func TestArchiveName(t *testing.T) {
	t.Parallel()
	tests := []struct{ entry, local, name, err string }{
		{"data/dict.tar.gz", "data/dict.tar.gz", "dict", ""},
		{"x.TGZ", "x.TGZ", "x", ""},
		{"/a/conf.zip#cfg", "/a/conf.zip", "cfg", ""},
		{"a.tar", "", "", "not a .tar.gz"},
		{"a.zip#", "", "", "cannot name"},
		{"a.zip#../up", "", "", "cannot name"},
		{"#x", "", "", "no path"},
		{".zip", "", "", "cannot name"},
	}
	for _, tt := range tests {
		local, name, err := ArchiveName(tt.entry)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ArchiveName(%q) = %q, %q, %v; want an error saying %q", tt.entry, local, name, err, tt.err)
			}
			continue
		}
		if err != nil || local != tt.local || name != tt.name {
			t.Errorf("ArchiveName(%q) = %q, %q, %v; want %q, %q", tt.entry, local, name, err, tt.local, tt.name)
		}
	}
	spec := JobSpec{Command: []string{"x"}, NumWorkers: 1, MaxAttempts: 1, Archives: []string{"a/d.zip", "b/d.tgz"}}
	if err := spec.Validate(); err == nil || !strings.Contains(err.Error(), `unpacks into "d" too`) {
		t.Errorf("two archives into one directory: %v", err)
	}
}

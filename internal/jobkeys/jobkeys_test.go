package jobkeys

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestWriteRead(t *testing.T) {
	k, err := New("", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(k.Secret) != 48 {
		t.Fatalf("secret %q", k.Secret)
	}
	path := filepath.Join(t.TempDir(), FileName)
	if err := WriteFile(path, k.ForTasks()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, err %v", fi.Mode(), err)
	}
	got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Secret != k.Secret || got.CertPEM != k.CertPEM || got.KeyPEM != "" {
		t.Fatalf("read %+v", got)
	}
	if err := WriteFile(path, k); err == nil {
		t.Fatal("WriteFile replaced a file")
	}
	if _, err := k.ServerTLS(); err != nil {
		t.Fatal(err)
	}
	if _, err := got.ServerTLS(); err == nil {
		t.Fatal("a task's keys serve TLS")
	}
}

func TestReadRefuses(t *testing.T) {
	dir := t.TempDir()
	k, err := New("s", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := k.Marshal()
	cases := map[string]struct {
		content string
		mode    os.FileMode
		want    string
	}{
		"readable": {string(b), 0o644, "others may read"},
		"garbage":  {"{", 0o600, "garbage"},
		"nosecret": {`{"cert":""}`, 0o600, "no secret"},
		"nocert":   {`{"secret":"x","cert":"nope"}`, 0o600, "no PEM"},
		"large":    {strings.Repeat(" ", maxFile+1), 0o600, "larger"},
	}
	for name, tc := range cases {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(tc.content), tc.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		_, err := ReadFile(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) && tc.want != "garbage" {
			t.Errorf("%s: ReadFile = %v", name, err)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("ReadFile of a missing file succeeded")
	}
}

func FuzzParse(f *testing.F) {
	k, _ := New("s", time.Hour)
	b, _ := k.Marshal()
	f.Add(b)
	f.Add([]byte(`{"secret":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := Parse("fuzz", b)
		if err == nil && k.Secret == "" {
			t.Fatal("parsed keys without a secret")
		}
	})
}

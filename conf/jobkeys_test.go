package conf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestJobKeysWriteRead(t *testing.T) {
	k, err := NewJobKeys("", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if len(k.Secret) != 48 {
		t.Fatalf("secret %q", k.Secret)
	}
	path := filepath.Join(t.TempDir(), JobKeysFile)
	if err := WriteJobKeys(path, k.ForTasks()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, err %v", fi.Mode(), err)
	}
	got, err := ReadJobKeys(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Secret != k.Secret || got.CertPEM != k.CertPEM || got.KeyPEM != "" {
		t.Fatalf("read %+v", got)
	}
	if err := WriteJobKeys(path, k); err == nil {
		t.Fatal("WriteFile replaced a file")
	}
	if _, err := k.ServerTLS(); err != nil {
		t.Fatal(err)
	}
	if _, err := got.ServerTLS(); err == nil {
		t.Fatal("a task's keys serve TLS")
	}
}

func TestJobKeysReadRefuses(t *testing.T) {
	dir := t.TempDir()
	k, err := NewJobKeys("s", time.Hour)
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
		"large":    {strings.Repeat(" ", maxJobKeysFile+1), 0o600, "larger"},
	}
	for name, tc := range cases {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(tc.content), tc.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		_, err := ReadJobKeys(path)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) && tc.want != "garbage" {
			t.Errorf("%s: ReadJobKeys = %v", name, err)
		}
	}
	if _, err := ReadJobKeys(filepath.Join(dir, "missing")); err == nil {
		t.Error("ReadJobKeys of a missing file succeeded")
	}
}

func FuzzParseJobKeys(f *testing.F) {
	k, _ := NewJobKeys("s", time.Hour)
	b, _ := k.Marshal()
	f.Add(b)
	f.Add([]byte(`{"secret":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseJobKeys("fuzz", b)
		if err == nil && k.Secret == "" {
			t.Fatal("parsed keys without a secret")
		}
	})
}

// TestFromEnvReadsTheKeysFile checks SPINDLE_JOB_KEYS and
// SPINDLE_INSECURE, and that Environ passes the file, not the secret.
func TestFromEnvReadsTheKeysFile(t *testing.T) {
	k, err := NewJobKeys("the secret", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), JobKeysFile)
	if err := WriteJobKeys(path, k.ForTasks()); err != nil {
		t.Fatal(err)
	}
	c, err := FromEnv(Default(), MapLookup(map[string]string{EnvJobKeys: path, EnvInsecure: "1"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.PS.JobSecret != "the secret" || string(c.Job.TrackerCert) != k.CertPEM || !c.PS.Insecure || c.PS.JobKeys != path {
		t.Fatalf("FromEnv = %+v", c.PS)
	}
	env := strings.Join(c.PS.Environ(), "\n")
	if strings.Contains(env, "the secret") || !strings.Contains(env, EnvJobKeys+"="+path) || !strings.Contains(env, EnvInsecure+"=1") {
		t.Fatalf("Environ:\n%s", env)
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err = FromEnv(Default(), MapLookup(map[string]string{EnvJobKeys: path}))
	if err == nil || !strings.Contains(err.Error(), EnvJobKeys) || !strings.Contains(err.Error(), path) {
		t.Fatalf("a readable keys file: %v", err)
	}
}

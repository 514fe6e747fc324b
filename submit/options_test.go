package submit

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spindle-ps/spindle/job"
)

// runMain runs Main in-process with env as the environment ps-submit
// looks up, and returns the exit status and both streams.
func runMain(t *testing.T, env map[string]string, args []string, opts ...Option) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	code = Main(context.Background(), args, strings.NewReader(""), &out, &errOut, lookup, nil, opts...)
	return code, out.String(), errOut.String()
}

// complete runs NewOptions and Complete on args.
func complete(t *testing.T, env map[string]string, args ...string) *Options {
	t.Helper()
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	o := NewOptions(Streams{}, lookup, nil)
	if err := o.Complete(args); err != nil {
		t.Fatalf("Complete(%q): %v", args, err)
	}
	return o
}

func TestCompleteParsesEveryFlag(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "vocab.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		got  func(*Options) any
		want any
	}{
		{"cluster", []string{"--cluster", "yarn"}, func(o *Options) any { return o.Cluster }, "yarn"},
		{"cluster single dash and any case", []string{"-cluster=LOCAL"}, func(o *Options) any { return o.Cluster }, "local"},
		{"num-workers", []string{"--num-workers", "3"}, func(o *Options) any { return o.NumWorkers }, 3},
		{"num-workers alias -n", []string{"-n", "4"}, func(o *Options) any { return o.NumWorkers }, 4},
		{"num-workers alias --n=", []string{"--n=5"}, func(o *Options) any { return o.NumWorkers }, 5},
		{"the last value counts", []string{"-n", "two", "-n", "2"}, func(o *Options) any { return o.NumWorkers }, 2},
		{"num-servers", []string{"--num-servers", "2"}, func(o *Options) any { return o.NumServers }, 2},
		{"principal and keytab", []string{"--cluster", "yarn", "--principal", "alice@EXAMPLE.COM", "--keytab", file}, func(o *Options) any { return o.Principal + " " + o.Keytab }, "alice@EXAMPLE.COM " + file},
		{"num-servers alias -s", []string{"-s", "3"}, func(o *Options) any { return o.NumServers }, 3},
		{"worker-cores", []string{"--worker-cores", "4"}, func(o *Options) any { return o.WorkerCores }, 4},
		{"server-cores", []string{"--server-cores=2"}, func(o *Options) any { return o.ServerCores }, 2},
		{"worker-memory m", []string{"--worker-memory", "512m"}, func(o *Options) any { return o.WorkerMemoryMB }, 512},
		{"worker-memory g", []string{"--worker-memory", "2g"}, func(o *Options) any { return o.WorkerMemoryMB }, 2048},
		{"worker-memory bare MB", []string{"--worker-memory", "1024"}, func(o *Options) any { return o.WorkerMemoryMB }, 1024},
		{"worker-memory upper case", []string{"--worker-memory", "4G"}, func(o *Options) any { return o.WorkerMemoryMB }, 4096},
		{"server-memory", []string{"--server-memory", "3g"}, func(o *Options) any { return o.ServerMemoryMB }, 3072},
		{"jobname", []string{"--jobname", "ctr-daily"}, func(o *Options) any { return o.JobName }, "ctr-daily"},
		{"queue", []string{"--queue", "ml"}, func(o *Options) any { return o.Queue }, "ml"},
		{"log-level INFO", []string{"--log-level", "INFO"}, func(o *Options) any { return o.LogLevel }, "info"},
		{"log-level DEBUG", []string{"--log-level", "DEBUG"}, func(o *Options) any { return o.LogLevel }, "debug"},
		{"log-level warn", []string{"--log-level", "warn"}, func(o *Options) any { return o.LogLevel }, "warning"},
		{"log-level error", []string{"--log-level", "Error"}, func(o *Options) any { return o.LogLevel }, "error"},
		{"env repeatable", []string{"--env", "A=1", "--env", "B=x=y"}, func(o *Options) any { return o.Env }, []string{"A=1", "B=x=y"}},
		{"server-env", []string{"--server-env", "S=1"}, func(o *Options) any { return o.ServerEnv }, []string{"S=1"}},
		{"worker-env", []string{"--worker-env", "W=1", "--worker-env=V="}, func(o *Options) any { return o.WorkerEnv }, []string{"W=1", "V="}},
		{"files", []string{"--files", file}, func(o *Options) any { return o.Files }, []string{file}},
		{"max-attempts", []string{"--max-attempts", "5"}, func(o *Options) any { return o.MaxAttempts }, 5},
		{"input repeatable", []string{"--input", "a.libsvm", "--input", "hdfs:///logs/*/*.libsvm"}, func(o *Options) any { return o.Inputs }, []string{"a.libsvm", "hdfs:///logs/*/*.libsvm"}},
		{"output", []string{"--output", "/tmp/model"}, func(o *Options) any { return o.Output }, "/tmp/model"},
		{"checkpoint-dir", []string{"--checkpoint-dir", "hdfs:///ckpt"}, func(o *Options) any { return o.CheckpointDir }, "hdfs:///ckpt"},
		{"checkpoint-interval epochs", []string{"--checkpoint-dir", "hdfs:///ckpt", "--checkpoint-interval", "2"}, func(o *Options) any { return o.CheckpointInterval }, "2"},
		{"checkpoint-interval minutes", []string{"--checkpoint-dir", "hdfs:///ckpt", "--checkpoint-interval", "10m"}, func(o *Options) any { return o.CheckpointInterval }, "10m"},
		{"split-size", []string{"--split-size", "64m"}, func(o *Options) any { return o.SplitSizeBytes }, int64(64 << 20)},
		{"split-size k", []string{"--split-size", "512K"}, func(o *Options) any { return o.SplitSizeBytes }, int64(512 << 10)},
		{"split-size bytes", []string{"--split-size", "1000"}, func(o *Options) any { return o.SplitSizeBytes }, int64(1000)},
		{"dry-run", []string{"--dry-run"}, func(o *Options) any { return o.DryRun }, true},
		{"dry-run=false", []string{"--dry-run=false"}, func(o *Options) any { return o.DryRun }, false},
		{"help", []string{"--help"}, func(o *Options) any { return o.Help }, true},
		{"help alias -h", []string{"-h"}, func(o *Options) any { return o.Help }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"-n", "1"}, tt.args...)
			args = append(args, "--", "prog")
			o := complete(t, nil, args...)
			if err := o.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if got := tt.got(o); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%q: got %#v, want %#v", tt.args, got, tt.want)
			}
		})
	}
}

func TestCompleteDefaults(t *testing.T) {
	t.Parallel()
	o := complete(t, nil, "-n", "2", "--", "./bin/ps-lr", "--epochs", "5")
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	spec := o.JobSpec()
	want := map[string]bool{
		"cluster":        o.Cluster == ClusterLocal,
		"name":           spec.Name == "spindle:ps-lr",
		"command":        reflect.DeepEqual(spec.Command, []string{"./bin/ps-lr", "--epochs", "5"}),
		"num-servers":    spec.NumServers == 0,
		"cores":          spec.WorkerCores == 1 && spec.ServerCores == 1,
		"memory":         spec.WorkerMemoryMB == 1024 && spec.ServerMemoryMB == 1024,
		"queue":          spec.Queue == "default",
		"log-level":      spec.LogLevel == "info",
		"max-attempts":   spec.MaxAttempts == 3,
		"split-size":     spec.SplitSize == 8<<20,
		"no dry-run":     !o.DryRun,
		"no output":      spec.Output == "" && spec.CheckpointDir == "" && spec.CheckpointInterval == "",
		"no inputs/envs": len(spec.Inputs)+len(spec.Env)+len(spec.ServerEnv)+len(spec.WorkerEnv)+len(spec.Files) == 0,
	}
	for what, ok := range want {
		if !ok {
			t.Errorf("default %s wrong: %+v (cluster %q)", what, spec, o.Cluster)
		}
	}
}

func TestCommandPosition(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"after --", []string{"-n", "1", "--", "prog", "-n", "5", "--", "x"}, []string{"prog", "-n", "5", "--", "x"}},
		{"at the first non-flag, like dmlc-submit", []string{"-n", "1", "prog", "--lr", "0.1"}, []string{"prog", "--lr", "0.1"}},
		{"flags before, none after", []string{"-s", "1", "-n", "2", "/bin/true"}, []string{"/bin/true"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := complete(t, nil, tt.args...)
			if !reflect.DeepEqual(o.Command, tt.want) {
				t.Errorf("command %q, want %q", o.Command, tt.want)
			}
		})
	}
}

func TestClusterDefaultsFromEnvironment(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    string
		wantErr string
	}{
		{"unset", nil, nil, ClusterLocal, ""},
		{"empty", map[string]string{envSubmitCluster: " "}, nil, ClusterLocal, ""},
		{"yarn", map[string]string{envSubmitCluster: "yarn"}, nil, ClusterYARN, ""},
		{"any case", map[string]string{envSubmitCluster: "Local"}, nil, ClusterLocal, ""},
		{"flag wins", map[string]string{envSubmitCluster: "yarn"}, []string{"--cluster", "local"}, ClusterLocal, ""},
		{"flag wins over a bad value", map[string]string{envSubmitCluster: "mesos"}, []string{"--cluster", "local"}, ClusterLocal, ""},
		{"bad value named with its source", map[string]string{envSubmitCluster: "mesos"}, nil, "mesos", `--cluster "mesos" (from $DMLC_SUBMIT_CLUSTER): want local or yarn`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{"-n", "1"}, tt.args...), "prog")
			o := complete(t, tt.env, args...)
			if o.Cluster != tt.want {
				t.Errorf("cluster %q, want %q", o.Cluster, tt.want)
			}
			err := o.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate: %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "no-such-file")
	file := filepath.Join(t.TempDir(), "alice.keytab")
	if err := os.WriteFile(file, []byte{5, 2}, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want []string // each on its own line of the standard error
	}{
		{"missing -n", []string{"--", "prog"}, nil, []string{"--num-workers (-n) is required"}},
		{"zero workers", []string{"-n", "0", "prog"}, nil, []string{"--num-workers 0: need at least 1"}},
		{"negative workers", []string{"-n", "-1", "prog"}, nil, []string{"--num-workers -1: need at least 1"}},
		{"negative servers", []string{"-n", "1", "-s", "-1", "prog"}, nil, []string{"--num-servers -1: must not be negative"}},
		{"workers not a number", []string{"-n", "two", "prog"}, nil, []string{`--num-workers "two": not a whole number`}},
		{"bad memory", []string{"-n", "1", "--worker-memory", "3x", "prog"}, nil, []string{`--worker-memory "3x": want a size such as 512m, 2g or 1024 (MB)`}},
		{"zero memory", []string{"-n", "1", "--server-memory", "0m", "prog"}, nil, []string{`--server-memory "0m": need at least 1m`}},
		{"env without value", []string{"-n", "1", "--env", "novalue", "prog"}, nil, []string{`--env "novalue": want KEY=VALUE`}},
		{"worker-env without key", []string{"-n", "1", "--worker-env", "=x", "prog"}, nil, []string{`--worker-env "=x": want KEY=VALUE`}},
		{"server-env without value", []string{"-n", "1", "--server-env", "S", "prog"}, nil, []string{`--server-env "S": want KEY=VALUE`}},
		{"unknown flag", []string{"-n", "1", "--bogus", "prog"}, nil, []string{"unknown flag --bogus (put the command's own flags after --)"}},
		{"unknown short flag", []string{"-x", "-n", "1", "prog"}, nil, []string{"unknown flag -x"}},
		{"dmlc-only flag with a hint", []string{"-n", "1", "--local-num-attempt", "2", "prog"}, nil, []string{"--local-num-attempt: dmlc-submit's flag is not supported by ps-submit; use --max-attempts"}},
		{"dmlc-only flag", []string{"-n", "1", "--host-file", "hosts", "prog"}, nil, []string{"--host-file: dmlc-submit's flag is not supported by ps-submit"}},
		{"flags after the command are the command's", []string{"prog", "-n", "2"}, nil, []string{"--num-workers (-n) is required"}},
		{"last flag without its value", []string{"-s", "1", "-n"}, nil, []string{"--num-workers needs a value"}},
		{"missing command", []string{"-n", "1"}, nil, []string{"no command to run: give it after --"}},
		{"missing command after --", []string{"-n", "1", "--"}, nil, []string{"no command to run"}},
		{"bad checkpoint interval", []string{"-n", "1", "--checkpoint-interval", "5x", "prog"}, nil, []string{`--checkpoint-interval "5x": want a number of epochs (2) or a duration (10m, 1h)`}},
		{"zero checkpoint interval", []string{"-n", "1", "--checkpoint-interval", "0", "prog"}, nil, []string{`--checkpoint-interval "0": need at least 1 epoch`}},
		{"negative checkpoint interval", []string{"-n", "1", "--checkpoint-interval", "-1m", "prog"}, nil, []string{`--checkpoint-interval "-1m": must be positive`}},
		{"checkpoint interval without a directory", []string{"-n", "1", "--checkpoint-interval", "2", "prog"}, nil, []string{`--checkpoint-interval "2": needs --checkpoint-dir`}},
		{"missing file", []string{"-n", "1", "--files", missing, "prog"}, nil, []string{`--files "` + missing + `": no such file`}},
		{"cluster mesos", []string{"--cluster", "mesos", "-n", "1", "prog"}, nil, []string{`--cluster "mesos": want local or yarn`}},
		{"cluster from the environment", []string{"-n", "1", "prog"}, map[string]string{envSubmitCluster: "slurm"}, []string{`--cluster "slurm" (from $DMLC_SUBMIT_CLUSTER)`}},
		{"bad log level", []string{"-n", "1", "--log-level", "verbose", "prog"}, nil, []string{`--log-level "verbose": want debug, info, warn or error`}},
		{"bad split size", []string{"-n", "1", "--split-size", "0", "prog"}, nil, []string{`--split-size "0": must be positive`}},
		{"zero attempts", []string{"-n", "1", "--max-attempts", "0", "prog"}, nil, []string{"--max-attempts 0: need at least 1"}},
		{"zero cores", []string{"-n", "1", "--worker-cores", "0", "--server-cores", "-1", "prog"}, nil, []string{"--worker-cores 0: need at least 1", "--server-cores -1: need at least 1"}},
		{"empty queue", []string{"-n", "1", "--queue", "", "prog"}, nil, []string{"--queue: must not be empty"}},
		{"principal without keytab", []string{"--cluster", "yarn", "-n", "1", "--principal", "alice@EXAMPLE.COM", "prog"}, nil, []string{"--principal and --keytab go together"}},
		{"missing keytab", []string{"--cluster", "yarn", "-n", "1", "--principal", "alice@EXAMPLE.COM", "--keytab", missing, "prog"}, nil, []string{"--keytab " + missing + ": "}},
		{"unknown --cpu-bind", []string{"-n", "1", "--cpu-bind", "all", "prog"}, nil, []string{`--cpu-bind "all": want auto, none, cores`}},
		{"--cpu-bind with YARN", []string{"--cluster", "yarn", "-n", "1", "--cpu-bind", "none", "prog"}, nil, []string{"--cpu-bind: only with --cluster local"}},
		{"keytab with a local job", []string{"-n", "1", "--principal", "alice@EXAMPLE.COM", "--keytab", file, "prog"}, nil, []string{"--principal and --keytab: only with --cluster yarn"}},
		{"bad boolean", []string{"-n", "1", "--dry-run=maybe", "prog"}, nil, []string{"dry-run"}},
		{"several problems at once", []string{"-n", "-1", "-s", "-2", "--worker-memory", "3x", "--env", "novalue",
			"--checkpoint-interval", "5x", "--cluster", "mesos", "--files", missing}, nil, []string{
			`--cluster "mesos"`, "--num-workers -1", "--num-servers -2", `--worker-memory "3x"`, `--env "novalue"`,
			`--files "` + missing + `"`, `--checkpoint-interval "5x"`, "no command to run"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runMain(t, tt.env, tt.args)
			if code != 2 {
				t.Errorf("exit status %d, want 2; stderr:\n%s", code, stderr)
			}
			if stdout != "" {
				t.Errorf("standard output %q, want nothing", stdout)
			}
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			if last := lines[len(lines)-1]; last != "run 'ps-submit --help' for usage" {
				t.Errorf("last line %q, want the pointer to --help", last)
			}
			problems := lines[:len(lines)-1]
			for _, p := range problems {
				if !strings.HasPrefix(p, "ps-submit: ") {
					t.Errorf("line %q does not start with ps-submit:", p)
				}
			}
			for _, w := range tt.want {
				found := false
				for _, p := range problems {
					found = found || strings.Contains(p, w)
				}
				if !found {
					t.Errorf("no line contains %q; stderr:\n%s", w, stderr)
				}
			}
			if len(problems) != len(tt.want) {
				t.Errorf("%d problems reported, want %d; stderr:\n%s", len(problems), len(tt.want), stderr)
			}
			if strings.Contains(stderr, "Usage:") || strings.Contains(stderr, "Examples:") || strings.Contains(stderr, "--num-workers N") {
				t.Errorf("usage dumped on a usage error:\n%s", stderr)
			}
		})
	}
}

func TestParseMemoryMB(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"512m", 512, true}, {"512M", 512, true}, {"512mb", 512, true}, {"2g", 2048, true}, {"2GB", 2048, true},
		{"1024", 1024, true}, {" 1g ", 1024, true}, {"3x", 0, false}, {"g", 0, false}, {"", 0, false},
		{"-1g", 0, false}, {"0", 0, false}, {"1.5g", 0, false}, {"99999999999g", 0, false}, {"1k", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseMemoryMB(tt.in)
			if got != tt.want || (err == nil) != tt.ok {
				t.Errorf("parseMemoryMB(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"8m", 8 << 20, true}, {"8M", 8 << 20, true}, {"512k", 512 << 10, true}, {"1g", 1 << 30, true},
		{"100", 100, true}, {"100b", 100, true}, {"64mb", 64 << 20, true}, {"0", 0, false}, {"8x", 0, false},
		{"", 0, false}, {"99999999999999g", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseSize(tt.in)
			if got != tt.want || (err == nil) != tt.ok {
				t.Errorf("parseSize(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestCheckInterval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in string
		ok bool
	}{
		{"1", true}, {"2", true}, {"10m", true}, {"1h30m", true}, {"90s", true},
		{"0", false}, {"-2", false}, {"0s", false}, {"5x", false}, {"m", false}, {"2 epochs", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			if err := checkInterval(tt.in); (err == nil) != tt.ok {
				t.Errorf("checkInterval(%q) = %v, want ok %v", tt.in, err, tt.ok)
			}
		})
	}
}

func TestIsTerminal(t *testing.T) {
	t.Parallel()
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(f) {
		t.Error("a regular file counts as a terminal")
	}
	if isTerminal(&bytes.Buffer{}) {
		t.Error("a buffer counts as a terminal")
	}
}

// FuzzCommandLine: any command line is parsed, or refused, without
// panicking; one Validate accepts describes a job whose every count is in
// range, whose sizes Complete derived, and whose tasks a launcher can
// plan. Arguments are separated by NUL bytes.
func FuzzCommandLine(f *testing.F) {
	for _, args := range [][]string{
		{"--cluster", "local", "-n", "2", "-s", "2", "--input", "data/*.libsvm", "--output", "/tmp/model", "--", "./ps-lr", "--epochs", "5"},
		{"--cluster=yarn", "--num-workers", "50", "--num-servers", "10", "--worker-memory", "4g", "--queue", "ml", "--tags", "a,b", "./ps-lr"},
		{"-n", "4", "-s", "0", "--split-size", "512k", "--checkpoint-dir", "/tmp/ck", "--checkpoint-interval", "10m", "--resume", "--", "./ps-dense"},
		{"--dry-run", "-n", "2", "-s", "1", "--replicas", "0", "--env", "A=1", "--worker-env=W=", "--max-attempts", "3", "--cpu-bind", "none", "--", "./ps-lr"},
		{"-n", "two", "--am-memory", "1gb", "--allocation-timeout", "30s", "--log-level", "DEBUG", "--archives", "dict.tar.gz#d", "x"},
	} {
		f.Add(strings.Join(args, "\x00"))
	}
	f.Fuzz(func(t *testing.T, line string) {
		o := NewOptions(Streams{}, nil, nil)
		if err := o.Complete(strings.Split(line, "\x00")); err != nil {
			if err.Error() == "" {
				t.Fatal("Complete: an error without a message")
			}
			return
		}
		if err := o.Validate(); err != nil {
			if err.Error() == "" {
				t.Fatal("Validate: an error without a message")
			}
			return
		}
		spec := o.JobSpec()
		if spec.NumWorkers < 1 || spec.NumWorkers > job.MaxWorkers || spec.NumServers < 0 || spec.NumServers > job.MaxServers {
			t.Fatalf("valid command line %q: %d workers and %d servers", line, spec.NumWorkers, spec.NumServers)
		}
		if o.WorkerMemoryMB < 1 || o.ServerMemoryMB < 1 || o.AMMemoryMB < 1 || o.SplitSizeBytes < 1 || o.AllocationTimeoutDuration <= 0 {
			t.Fatalf("valid command line %q: memory %d, %d and %d MB, split size %d, allocation timeout %v",
				line, o.WorkerMemoryMB, o.ServerMemoryMB, o.AMMemoryMB, o.SplitSizeBytes, o.AllocationTimeoutDuration)
		}
		if n := len(job.Tasks(spec)); n > 1+spec.NumServers+spec.NumWorkers {
			t.Fatalf("valid command line %q: %d tasks", line, n)
		}
	})
}

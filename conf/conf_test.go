package conf

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func validEnv() map[string]string {
	return map[string]string{
		EnvRole:          "worker",
		EnvNumWorker:     "3",
		EnvNumServer:     "2",
		EnvRootURI:       "127.0.0.1",
		EnvRootPort:      "9091",
		EnvJobSecret:     "s3cret",
		EnvTaskID:        "1",
		EnvResendTimeout: "250",
	}
}

func TestFromEnvParsesTheContract(t *testing.T) {
	t.Parallel()
	env := validEnv()
	env[EnvHeartbeatInterval] = "0.5"
	env[EnvHeartbeatTimeout] = "4"
	env[EnvResend] = "1"
	env[EnvDropMsg] = "12.5"
	env[EnvDMLCPort] = "7000"
	env[EnvMaxDimension] = "1000000"
	env[EnvLocal] = "1"
	env[EnvIPCDir] = "/run/job-7"
	env[EnvBusyPoll] = "1"
	c, err := FromEnv(Default(), MapLookup(env))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	p := c.PS
	checks := []struct {
		name      string
		got, want any
	}{
		{"role", p.Role, RoleWorker},
		{"workers", p.NumWorkers, 3},
		{"servers", p.NumServers, 2},
		{"root", p.RootURI, "127.0.0.1"},
		{"root port", p.RootPort, 9091},
		{"task", p.TaskID, 1},
		{"resend", p.Resend, true},
		{"resend timeout", p.ResendTimeout, 250 * time.Millisecond},
		{"heartbeat interval", p.HeartbeatInterval, 500 * time.Millisecond},
		{"heartbeat timeout", p.HeartbeatTimeout, 4 * time.Second},
		{"drop", p.DropMsg, 12.5},
		{"port alias", p.Port, 7000},
		{"max dimension", p.MaxDimension, uint64(1000000)},
		{"local", p.Local, true},
		{"ipc dir", p.IPCDir, "/run/job-7"},
		{"busy poll", p.BusyPoll, true},
		{"secret", p.JobSecret, "s3cret"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

func TestDefaultsAreSafe(t *testing.T) {
	t.Parallel()
	c, err := FromEnv(Default(), MapLookup(validEnv()))
	if err != nil {
		t.Fatal(err)
	}
	if c.PS.HeartbeatInterval != time.Second || c.PS.HeartbeatTimeout != 10*time.Second {
		t.Errorf("heartbeats default to %v/%v, want 1s/10s (on, unlike ps-lite)", c.PS.HeartbeatInterval, c.PS.HeartbeatTimeout)
	}
	if c.PS.ResendRetries != 10 || c.PS.Partitioner != "range" {
		t.Errorf("resend retries %d partitioner %q", c.PS.ResendRetries, c.PS.Partitioner)
	}
}

func TestPortWinsOverDMLCPort(t *testing.T) {
	t.Parallel()
	env := validEnv()
	env[EnvPort], env[EnvDMLCPort] = "8000", "9000"
	c, err := FromEnv(Default(), MapLookup(env))
	if err != nil || c.PS.Port != 8000 {
		t.Fatalf("port %d err %v, want 8000", c.PS.Port, err)
	}
}

func TestPerRoleIDAliases(t *testing.T) {
	t.Parallel()
	env := validEnv()
	delete(env, EnvTaskID)
	env[EnvRole] = "server"
	env[EnvServerID] = "1"
	env[EnvWorkerID] = "2"
	c, err := FromEnv(Default(), MapLookup(env))
	if err != nil || c.PS.TaskID != 1 {
		t.Fatalf("task id %d err %v, want DMLC_SERVER_ID's 1", c.PS.TaskID, err)
	}
}

func TestBadValuesAreAllNamed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		env   map[string]string
		parse []string // variables named by FromEnv's error
		valid []string // variables named by Validate's error
	}{
		{
			name:  "unparsable",
			env:   map[string]string{EnvNumWorker: "three", EnvRootPort: "port", EnvResend: "maybe", EnvHeartbeatTimeout: "soon", EnvMaxDimension: "-1", EnvTaskMemoryMB: "-512"},
			parse: []string{EnvNumWorker, EnvRootPort, EnvResend, EnvHeartbeatTimeout, EnvMaxDimension, EnvTaskMemoryMB},
		},
		{
			name:  "out of range",
			env:   map[string]string{EnvRole: "boss", EnvNumWorker: "0", EnvRootPort: "70000", EnvDropMsg: "100", EnvHeartbeatInterval: "5", EnvHeartbeatTimeout: "2", EnvPartitioner: "modulo"},
			valid: []string{EnvRole, EnvNumWorker, EnvRootPort, EnvDropMsg, EnvHeartbeatTimeout, EnvPartitioner},
		},
		{
			name:  "missing",
			env:   map[string]string{EnvRole: "", EnvRootURI: "", EnvRootPort: ""},
			valid: []string{EnvRole, EnvRootURI, EnvRootPort},
		},
		{
			name:  "task id beyond the role's count",
			env:   map[string]string{EnvTaskID: "3"},
			valid: []string{EnvTaskID},
		},
		{
			name:  "heartbeats off but timeout on",
			env:   map[string]string{EnvHeartbeatInterval: "0"},
			valid: []string{EnvHeartbeatInterval},
		},
		{
			name:  "unsupported van",
			env:   map[string]string{EnvVanType: "ibverbs"},
			parse: []string{EnvVanType},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := validEnv()
			for k, v := range tt.env {
				env[k] = v
			}
			c, err := FromEnv(Default(), MapLookup(env))
			if len(tt.parse) > 0 {
				if err == nil {
					t.Fatal("FromEnv accepted bad values")
				}
				for _, name := range tt.parse {
					if !strings.Contains(err.Error(), name) {
						t.Errorf("FromEnv error %q does not name %s", err, name)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			err = c.Validate()
			if err == nil {
				t.Fatal("Validate accepted bad values")
			}
			for _, name := range tt.valid {
				if !strings.Contains(err.Error(), name) {
					t.Errorf("Validate error %q does not name %s", err, name)
				}
			}
		})
	}
}

func TestValidateDoesNotFillIn(t *testing.T) {
	t.Parallel()
	var c Config
	if err := c.Validate(); err == nil {
		t.Fatal("zero config validated")
	}
	if c.PS.HeartbeatInterval != 0 {
		t.Fatal("Validate changed the config")
	}
}

func TestEnvironRoundTrips(t *testing.T) {
	t.Parallel()
	p := Default().PS
	p.Role, p.NumWorkers, p.NumServers = RoleServer, 4, 2
	p.RootURI, p.RootPort = "10.0.0.1", 9000
	p.TaskID, p.NumAttempt = 1, 2
	p.Resend, p.ResendTimeout = true, 300*time.Millisecond
	p.HeartbeatInterval, p.HeartbeatTimeout = 2*time.Second, 20*time.Second
	p.JobSecret, p.JobCluster = "x", "local"
	p.MaxDimension, p.Partitioner = 1<<20, "hash"
	p.BusyPoll = true
	p.Local, p.IPCDir = true, "/run/job-7"
	env := map[string]string{}
	for _, kv := range p.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if env[EnvServerID] != "1" {
		t.Errorf("DMLC_SERVER_ID = %q, want 1", env[EnvServerID])
	}
	got, err := FromEnv(Default(), MapLookup(env))
	if err != nil {
		t.Fatal(err)
	}
	if got.PS != p {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got.PS, p)
	}
}

func TestJobEnvironRoundTrips(t *testing.T) {
	t.Parallel()
	j := Job{
		Name: "lr", TrackerAddr: "10.0.0.1:9100", Output: "hdfs:///models/m",
		CheckpointDir: "hdfs:///ckpt", CheckpointInterval: "2",
		ResumeFrom: "hdfs:///ckpt/3", ResumeEpoch: 3, TaskMemoryMB: 2048,
	}
	env := validEnv()
	for _, kv := range j.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	got, err := FromEnv(Default(), MapLookup(env))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Job, j) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got.Job, j)
	}
}

func TestUnknownKeys(t *testing.T) {
	t.Parallel()
	got := UnknownKeys([]string{"PS_VERBOSE=1", "PS_HEARTBEAT_INTERVALL=3", "PATH=/bin", "PS_RESND=1", "DMLC_ROLE=worker"})
	if strings.Join(got, ",") != "PS_HEARTBEAT_INTERVALL,PS_RESND" {
		t.Fatalf("unknown keys %v", got)
	}
}

func FuzzFromEnv(f *testing.F) {
	f.Add("worker", "3", "2", "9091", "250", "1", "0.5", "12.5", "100")
	f.Add("", "-1", "x", "", "1e400", "yes", "NaN", "-3", "18446744073709551616")
	f.Fuzz(func(t *testing.T, role, nw, ns, port, rto, resend, hb, drop, maxdim string) {
		env := map[string]string{
			EnvRole: role, EnvNumWorker: nw, EnvNumServer: ns, EnvRootPort: port,
			EnvResendTimeout: rto, EnvResend: resend, EnvHeartbeatInterval: hb, EnvDropMsg: drop,
			EnvMaxDimension: maxdim, EnvRootURI: "h",
		}
		c, err := FromEnv(Default(), MapLookup(env))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "conf: environment: ") {
				t.Fatalf("error without context: %v", err)
			}
			return
		}
		if verr := c.Validate(); verr != nil {
			var joined interface{ Unwrap() []error }
			if !errors.As(verr, &joined) {
				t.Fatalf("validation error is not a list: %v", verr)
			}
			return
		}
		// A valid configuration's counts are in range.
		if w, s := c.PS.NumWorkers, c.PS.NumServers; w < 1 || s < 0 || w > MaxWorkers || s > MaxServers {
			t.Fatalf("valid configuration of %d workers and %d servers", w, s)
		}
	})
}

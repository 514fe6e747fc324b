package conf

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ExitRestartJob is the exit status by which a task asks its launcher to
// start the whole job again from the newest usable checkpoint, as the
// launcher does when it loses a server: for instance a synchronous
// worker that cannot go on because another worker died mid-step. It does
// not count against the task's attempts; the job starts again at most
// --max-attempts - 1 times in all.
const ExitRestartJob = 75

// ExitBadInput is the exit status by which a task says that its input or
// its arguments are at fault: a malformed record past --max-bad-records,
// for instance. Starting it again would fail the same way, so its
// launcher ends the job at once instead of spending the task's attempts,
// and for a synchronous worker or a server whole-job restarts, on it. 65
// is sysexits.h's EX_DATAERR, as 75 is its EX_TEMPFAIL.
const ExitBadInput = 65

// The environment variables of the ps-lite contract and Spindle's own.
const (
	EnvRole              = "DMLC_ROLE"
	EnvNumWorker         = "DMLC_NUM_WORKER"
	EnvNumServer         = "DMLC_NUM_SERVER"
	EnvRootURI           = "DMLC_PS_ROOT_URI"
	EnvRootPort          = "DMLC_PS_ROOT_PORT"
	EnvNodeHost          = "DMLC_NODE_HOST"
	EnvInterface         = "DMLC_INTERFACE"
	EnvPort              = "PORT"
	EnvDMLCPort          = "DMLC_PORT"
	EnvLocal             = "DMLC_LOCAL"
	EnvVerbose           = "PS_VERBOSE"
	EnvResend            = "PS_RESEND"
	EnvResendTimeout     = "PS_RESEND_TIMEOUT"
	EnvHeartbeatInterval = "PS_HEARTBEAT_INTERVAL"
	EnvHeartbeatTimeout  = "PS_HEARTBEAT_TIMEOUT"
	EnvDropMsg           = "PS_DROP_MSG"
	EnvWaterMark         = "DMLC_PS_WATER_MARK"
	EnvMaxDimension      = "DMLC_MAX_DIMENSION"
	EnvTaskID            = "DMLC_TASK_ID"
	EnvWorkerID          = "DMLC_WORKER_ID"
	EnvServerID          = "DMLC_SERVER_ID"
	EnvNumAttempt        = "DMLC_NUM_ATTEMPT"
	EnvJobCluster        = "DMLC_JOB_CLUSTER"
	EnvRank              = "DMLC_RANK"
	EnvVanType           = "DMLC_PS_VAN_TYPE"

	EnvJobSecret          = "SPINDLE_JOB_SECRET"
	EnvJobKeys            = "SPINDLE_JOB_KEYS"
	EnvInsecure           = "SPINDLE_INSECURE"
	EnvBusyPoll           = "SPINDLE_BUSY_POLL"
	EnvIPCDir             = "SPINDLE_IPC_DIR"
	EnvJoining            = "SPINDLE_JOINING"
	EnvJobName            = "SPINDLE_JOB_NAME"
	EnvTrackerAddr        = "SPINDLE_TRACKER_ADDR"
	EnvOutput             = "SPINDLE_OUTPUT"
	EnvCheckpointDir      = "SPINDLE_CHECKPOINT_DIR"
	EnvCheckpointInterval = "SPINDLE_CHECKPOINT_INTERVAL"
	EnvResumeFrom         = "SPINDLE_RESUME_FROM"
	EnvResumeEpoch        = "SPINDLE_RESUME_EPOCH"
	EnvJobRun             = "SPINDLE_JOB_RUN"
	EnvResendRetries      = "SPINDLE_RESEND_RETRIES"
	EnvDropSeed           = "SPINDLE_DROP_SEED"
	EnvPartitioner        = "SPINDLE_PARTITIONER"
	EnvReplicas           = "SPINDLE_REPLICAS"
	EnvRegisterTimeout    = "SPINDLE_REGISTER_TIMEOUT"
	EnvShutdownTimeout    = "SPINDLE_SHUTDOWN_TIMEOUT"
	EnvStallTimeout       = "SPINDLE_STALL_TIMEOUT"
	EnvTaskMemoryMB       = "SPINDLE_TASK_MEMORY_MB"
)

// DefaultTaskMemoryMB is the memory of a task whose role's size is not
// given: a YARN container's default size (job.DefaultMemoryMB), and what
// a task assumes when SPINDLE_TASK_MEMORY_MB is not set.
const DefaultTaskMemoryMB = 1024

// Lookup finds an environment variable, as os.LookupEnv does. Tests pass
// a map-backed Lookup; only main packages pass os.LookupEnv.
type Lookup func(key string) (string, bool)

// MapLookup returns a Lookup over m.
func MapLookup(m map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// FromEnv overlays the environment contract on c and returns the result.
// It parses every variable it knows; a value that does not parse is an
// error naming the variable and the value, and all such errors are
// reported together. Values are checked for form only: call Validate for
// ranges and cross-field rules.
func FromEnv(c Config, lookup Lookup) (Config, error) {
	var errs []error
	p := &c.PS
	str := func(name string, dst *string) {
		if v, ok := lookup(name); ok {
			*dst = strings.TrimSpace(v)
		}
	}
	integer := func(name string, dst *int) bool {
		v, ok := lookup(name)
		if !ok || strings.TrimSpace(v) == "" {
			return false
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: not an integer", name, v))
			return false
		}
		*dst = n
		return true
	}
	boolean := func(name string, dst *bool) {
		v, ok := lookup(name)
		if !ok || strings.TrimSpace(v) == "" {
			return
		}
		b, err := parseBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
			return
		}
		*dst = b
	}
	duration := func(name string, unit time.Duration, dst *time.Duration) {
		v, ok := lookup(name)
		if !ok || strings.TrimSpace(v) == "" {
			return
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f > float64(math.MaxInt64/int64(unit)) {
			errs = append(errs, fmt.Errorf("%s=%q: not a number of %s", name, v, unitName(unit)))
			return
		}
		*dst = time.Duration(f * float64(unit))
	}

	if v, ok := lookup(EnvRole); ok {
		p.Role = Role(strings.ToLower(strings.TrimSpace(v)))
	}
	integer(EnvNumWorker, &p.NumWorkers)
	integer(EnvNumServer, &p.NumServers)
	str(EnvRootURI, &p.RootURI)
	integer(EnvRootPort, &p.RootPort)
	str(EnvNodeHost, &p.NodeHost)
	str(EnvInterface, &p.Interface)
	if !integer(EnvPort, &p.Port) {
		integer(EnvDMLCPort, &p.Port)
	}
	boolean(EnvLocal, &p.Local)
	str(EnvIPCDir, &p.IPCDir)
	integer(EnvVerbose, &p.Verbose)
	boolean(EnvResend, &p.Resend)
	duration(EnvResendTimeout, time.Millisecond, &p.ResendTimeout)
	integer(EnvResendRetries, &p.ResendRetries)
	duration(EnvHeartbeatInterval, time.Second, &p.HeartbeatInterval)
	duration(EnvHeartbeatTimeout, time.Second, &p.HeartbeatTimeout)
	if v, ok := lookup(EnvDropMsg); ok && strings.TrimSpace(v) != "" {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) {
			errs = append(errs, fmt.Errorf("%s=%q: not a percentage", EnvDropMsg, v))
		} else {
			p.DropMsg = f
		}
	}
	if v, ok := lookup(EnvDropSeed); ok && strings.TrimSpace(v) != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: not an integer", EnvDropSeed, v))
		} else {
			p.DropSeed = n
		}
	}
	integer(EnvWaterMark, &p.WaterMark)
	if v, ok := lookup(EnvMaxDimension); ok && strings.TrimSpace(v) != "" {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: not a non-negative integer", EnvMaxDimension, v))
		} else {
			p.MaxDimension = n
		}
	}
	str(EnvPartitioner, &p.Partitioner)
	integer(EnvReplicas, &p.Replicas)
	// DMLC_TASK_ID wins; the per-role ids of other launchers are aliases.
	if !integer(EnvTaskID, &p.TaskID) {
		switch p.Role {
		case RoleWorker:
			integer(EnvWorkerID, &p.TaskID)
		case RoleServer:
			integer(EnvServerID, &p.TaskID)
		}
	}
	integer(EnvNumAttempt, &p.NumAttempt)
	str(EnvJobCluster, &p.JobCluster)
	str(EnvJobSecret, &p.JobSecret)
	str(EnvJobKeys, &p.JobKeys)
	if p.JobKeys != "" {
		k, err := ReadJobKeys(p.JobKeys)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", EnvJobKeys, p.JobKeys, err))
		} else {
			p.JobSecret, c.Job.TrackerCert = k.Secret, []byte(k.CertPEM)
		}
	}
	boolean(EnvInsecure, &p.Insecure)
	boolean(EnvBusyPoll, &p.BusyPoll)
	boolean(EnvJoining, &p.Joining)
	duration(EnvRegisterTimeout, time.Second, &p.RegisterTimeout)
	duration(EnvShutdownTimeout, time.Second, &p.ShutdownTimeout)
	duration(EnvStallTimeout, time.Second, &p.StallTimeout)
	str(EnvJobName, &c.Job.Name)
	str(EnvTrackerAddr, &c.Job.TrackerAddr)
	str(EnvOutput, &c.Job.Output)
	str(EnvCheckpointDir, &c.Job.CheckpointDir)
	str(EnvCheckpointInterval, &c.Job.CheckpointInterval)
	str(EnvResumeFrom, &c.Job.ResumeFrom)
	if integer(EnvResumeEpoch, &c.Job.ResumeEpoch) && c.Job.ResumeEpoch < 0 {
		errs = append(errs, fmt.Errorf("%s=%d: must not be negative", EnvResumeEpoch, c.Job.ResumeEpoch))
	}
	if integer(EnvJobRun, &c.Job.Run) && c.Job.Run < 0 {
		errs = append(errs, fmt.Errorf("%s=%d: must not be negative", EnvJobRun, c.Job.Run))
	}
	if integer(EnvTaskMemoryMB, &c.Job.TaskMemoryMB) && c.Job.TaskMemoryMB < 0 {
		errs = append(errs, fmt.Errorf("%s=%d: must not be negative", EnvTaskMemoryMB, c.Job.TaskMemoryMB))
	}
	if v, ok := lookup(EnvVanType); ok && v != "" && v != "zmq" {
		errs = append(errs, fmt.Errorf("%s=%q: only zmq is supported", EnvVanType, v))
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("conf: environment: %w", errors.Join(errs...))
	}
	return c, nil
}

// known lists every PS_* and DMLC_* variable FromEnv reads or that
// launchers set for the program's own use; UnknownKeys reports the rest.
var known = map[string]bool{
	EnvRole: true, EnvNumWorker: true, EnvNumServer: true, EnvRootURI: true, EnvRootPort: true,
	EnvNodeHost: true, EnvInterface: true, EnvDMLCPort: true, EnvLocal: true, EnvVerbose: true,
	EnvResend: true, EnvResendTimeout: true, EnvHeartbeatInterval: true, EnvHeartbeatTimeout: true,
	EnvDropMsg: true, EnvWaterMark: true, EnvMaxDimension: true, EnvTaskID: true, EnvWorkerID: true,
	EnvServerID: true, EnvNumAttempt: true, EnvJobCluster: true, EnvRank: true, EnvVanType: true,
	"DMLC_SUBMIT_CLUSTER": true, "DMLC_USE_KUBERNETES": true, "DMLC_TRACKER_URI": true,
	"DMLC_TRACKER_PORT": true, "DMLC_MAX_ATTEMPT": true,
	"DMLC_WORKER_CORES": true, "DMLC_WORKER_MEMORY_MB": true, "DMLC_SERVER_CORES": true,
	"DMLC_SERVER_MEMORY_MB": true, "DMLC_JOB_ARCHIVES": true, "DMLC_HDFS_OPTS": true,
}

// UnknownKeys returns, sorted, the PS_* variables of environ (KEY=VALUE
// strings, as from os.Environ) that no part of Spindle reads: most likely
// misspellings, worth a warning.
func UnknownKeys(environ []string) []string {
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PS_") && !known[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func parseBool(v string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, errors.New("not a boolean (want 0 or 1)")
}

func unitName(u time.Duration) string {
	if u == time.Millisecond {
		return "milliseconds"
	}
	return "seconds"
}

// Environ renders j as environment settings for a job's processes,
// leaving out empty fields.
func (j Job) Environ() []string {
	var out []string
	for _, kv := range [][2]string{
		{EnvJobName, j.Name}, {EnvTrackerAddr, j.TrackerAddr}, {EnvOutput, j.Output},
		{EnvCheckpointDir, j.CheckpointDir}, {EnvCheckpointInterval, j.CheckpointInterval},
		{EnvResumeFrom, j.ResumeFrom},
	} {
		if kv[1] != "" {
			out = append(out, kv[0]+"="+kv[1])
		}
	}
	if j.ResumeFrom != "" {
		out = append(out, EnvResumeEpoch+"="+strconv.Itoa(j.ResumeEpoch))
	}
	if j.Run > 0 {
		out = append(out, EnvJobRun+"="+strconv.Itoa(j.Run))
	}
	if j.TaskMemoryMB > 0 {
		out = append(out, EnvTaskMemoryMB+"="+strconv.Itoa(j.TaskMemoryMB))
	}
	return out
}

// Environ renders p as the environment contract, KEY=VALUE strings in a
// fixed order, for a launcher to hand to a child process. Only the fields
// that differ from Default are written, except the required ones.
func (p PS) Environ() []string {
	d := Default().PS
	out := []string{
		EnvRole + "=" + string(p.Role),
		EnvNumWorker + "=" + strconv.Itoa(p.NumWorkers),
		EnvNumServer + "=" + strconv.Itoa(p.NumServers),
		EnvRootURI + "=" + p.RootURI,
		EnvRootPort + "=" + strconv.Itoa(p.RootPort),
	}
	add := func(k, v string) { out = append(out, k+"="+v) }
	if p.NodeHost != "" {
		add(EnvNodeHost, p.NodeHost)
	}
	if p.Interface != "" {
		add(EnvInterface, p.Interface)
	}
	if p.Port != 0 {
		add(EnvPort, strconv.Itoa(p.Port))
	}
	if p.Local {
		add(EnvLocal, "1")
	}
	if p.IPCDir != "" {
		add(EnvIPCDir, p.IPCDir)
	}
	if p.Verbose != 0 {
		add(EnvVerbose, strconv.Itoa(p.Verbose))
	}
	if p.Resend {
		add(EnvResend, "1")
	}
	if p.ResendTimeout != d.ResendTimeout {
		add(EnvResendTimeout, strconv.FormatInt(p.ResendTimeout.Milliseconds(), 10))
	}
	if p.ResendRetries != d.ResendRetries {
		add(EnvResendRetries, strconv.Itoa(p.ResendRetries))
	}
	if p.HeartbeatInterval != d.HeartbeatInterval {
		add(EnvHeartbeatInterval, strconv.FormatFloat(p.HeartbeatInterval.Seconds(), 'g', -1, 64))
	}
	if p.HeartbeatTimeout != d.HeartbeatTimeout {
		add(EnvHeartbeatTimeout, strconv.FormatFloat(p.HeartbeatTimeout.Seconds(), 'g', -1, 64))
	}
	if p.DropMsg != 0 {
		add(EnvDropMsg, strconv.FormatFloat(p.DropMsg, 'g', -1, 64))
	}
	if p.DropSeed != 0 {
		add(EnvDropSeed, strconv.FormatInt(p.DropSeed, 10))
	}
	if p.WaterMark != 0 {
		add(EnvWaterMark, strconv.Itoa(p.WaterMark))
	}
	if p.MaxDimension != 0 {
		add(EnvMaxDimension, strconv.FormatUint(p.MaxDimension, 10))
	}
	if p.Partitioner != d.Partitioner {
		add(EnvPartitioner, p.Partitioner)
	}
	if p.Replicas != 0 {
		add(EnvReplicas, strconv.Itoa(p.Replicas))
	}
	if p.TaskID >= 0 {
		add(EnvTaskID, strconv.Itoa(p.TaskID))
		switch p.Role {
		case RoleWorker:
			add(EnvWorkerID, strconv.Itoa(p.TaskID))
		case RoleServer:
			add(EnvServerID, strconv.Itoa(p.TaskID))
		}
	}
	add(EnvNumAttempt, strconv.Itoa(p.NumAttempt))
	if p.JobCluster != "" {
		add(EnvJobCluster, p.JobCluster)
	}
	if p.JobKeys != "" {
		add(EnvJobKeys, p.JobKeys)
	} else if p.JobSecret != "" {
		add(EnvJobSecret, p.JobSecret)
	}
	if p.Insecure {
		add(EnvInsecure, "1")
	}
	if p.BusyPoll {
		add(EnvBusyPoll, "1")
	}
	if p.Joining {
		add(EnvJoining, "1")
	}
	if p.RegisterTimeout != d.RegisterTimeout {
		add(EnvRegisterTimeout, strconv.FormatFloat(p.RegisterTimeout.Seconds(), 'g', -1, 64))
	}
	if p.ShutdownTimeout != d.ShutdownTimeout {
		add(EnvShutdownTimeout, strconv.FormatFloat(p.ShutdownTimeout.Seconds(), 'g', -1, 64))
	}
	if p.StallTimeout != d.StallTimeout {
		add(EnvStallTimeout, strconv.FormatFloat(p.StallTimeout.Seconds(), 'g', -1, 64))
	}
	return out
}

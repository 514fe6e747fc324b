// Package hadooptest gives the integration tests the Hadoop
// cluster to run against: the one HADOOP_CONF_DIR describes (for
// instance scripts/minicluster.sh's). Without one the tests skip, saying
// why, unless SPINDLE_TEST_HADOOP=required, when they fail instead.
package hadooptest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/hadoop/creds"
	"github.com/spindle-ps/spindle/io/dfs"
)

// EnvRequired is the variable that turns skips into failures when set to
// "required" (scripts/test.sh sets it for its Hadoop stage).
const EnvRequired = "SPINDLE_TEST_HADOOP"

// Required reports whether SPINDLE_TEST_HADOOP=required.
func Required() bool { return os.Getenv(EnvRequired) == "required" }

// unavailable skips t, or fails it when the cluster is required.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf("Hadoop cluster required (%s=required) but: "+format, append([]any{EnvRequired}, args...)...)
	}
	t.Skipf("no Hadoop cluster: "+format+" (start one with scripts/minicluster.sh start; eval \"$(scripts/minicluster.sh env)\")", args...)
}

// Cluster describes the cluster under test.
type Cluster struct {
	Conf     conf.HadoopConf
	User     string
	Resolver *dfs.Resolver
	// FS is the HDFS of fs.defaultFS.
	FS *dfs.HDFS
}

// Connect loads the cluster's configuration, checks that its NameNode
// answers, and returns it; it skips or fails t when there is no cluster.
// The Resolver is closed when t ends.
func Connect(t testing.TB) *Cluster {
	t.Helper()
	if os.Getenv(conf.EnvHadoopConfDir) == "" {
		unavailable(t, "%s is not set", conf.EnvHadoopConfDir)
	}
	h, err := conf.LoadHadoop(os.LookupEnv)
	if err != nil {
		unavailable(t, "loading its configuration: %v", err)
	}
	hc, user := h.Conf, h.User
	if !strings.HasPrefix(hc.DefaultFS(), "hdfs://") {
		unavailable(t, "fs.defaultFS is %q, not an hdfs:// URI", hc.DefaultFS())
	}
	var cred dfs.Credentials
	if h.Security.Kerberos {
		if cred, err = dfs.LoadCredentials(h.Security); err != nil {
			unavailable(t, "%v", err)
		}
	}
	r := dfs.NewSecureResolver(hc, user, cred)
	t.Cleanup(func() { r.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fsys, _, err := r.Resolve(ctx, "hdfs:///")
	if err != nil {
		unavailable(t, "%v", err)
	}
	if _, err := fsys.Stat(ctx, "/"); err != nil {
		unavailable(t, "NameNode of %s does not answer: %v", hc.DefaultFS(), err)
	}
	return &Cluster{Conf: hc, User: user, Resolver: r, FS: fsys.(*dfs.HDFS)}
}

// EnvKerberosRequired is the variable that makes the Kerberos tests fail,
// not skip, without a Kerberos-secured cluster (scripts/test.sh sets it
// for its Kerberos stage).
const EnvKerberosRequired = "SPINDLE_TEST_KERBEROS"

// ConnectKerberos is Connect for the tests of a Kerberos-secured cluster:
// scripts/minicluster.sh start --kerberos, whose env sets
// SPINDLE_MINICLUSTER_KERBEROS=1 and the ticket cache of its user. They
// skip without one, or fail when SPINDLE_TEST_KERBEROS=required.
func ConnectKerberos(t testing.TB) *Cluster {
	t.Helper()
	if os.Getenv("SPINDLE_MINICLUSTER_KERBEROS") != "1" {
		if os.Getenv(EnvKerberosRequired) == "required" {
			t.Fatalf("Kerberos cluster required (%s=required) but SPINDLE_MINICLUSTER_KERBEROS is not 1", EnvKerberosRequired)
		}
		t.Skip("no Kerberos-secured cluster (start one with scripts/minicluster.sh start --kerberos; eval \"$(scripts/minicluster.sh env)\")")
	}
	c := Connect(t)
	if !strings.EqualFold(c.Conf.GetDefault("hadoop.security.authentication", ""), "kerberos") {
		t.Fatalf("SPINDLE_MINICLUSTER_KERBEROS=1 but the cluster's hadoop.security.authentication is %q", c.Conf.GetDefault("hadoop.security.authentication", ""))
	}
	return c
}

// EnvTokenLifetimeRequired is the variable that makes the tests of
// delegation tokens past their maximum lifetime fail, not skip, without a
// cluster whose tokens live at most MaxShortLifetime (scripts/test.sh
// sets it for its stage of such a cluster).
const EnvTokenLifetimeRequired = "SPINDLE_TEST_TOKEN_LIFETIME"

// MaxShortLifetime is the longest maximum lifetime of a delegation token
// that ConnectShortTokens accepts.
const MaxShortLifetime = 2 * time.Minute

// ShortTokens is what ConnectShortTokens found: the maximum lifetime of
// the cluster's HDFS delegation tokens, and one of them, obtained then
// by the test's user and renewable by it.
type ShortTokens struct {
	Lifetime time.Duration
	Token    creds.Token
}

// ConnectShortTokens is ConnectKerberos for the tests of jobs that outlive
// their delegation tokens: a Kerberos-secured cluster started with a
// short dfs.namenode.delegation.token.max-lifetime, at most
// MaxShortLifetime. It skips on another cluster, or fails when
// SPINDLE_TEST_TOKEN_LIFETIME=required.
func ConnectShortTokens(t testing.TB) (*Cluster, ShortTokens) {
	t.Helper()
	required := os.Getenv(EnvTokenLifetimeRequired) == "required"
	if !required && os.Getenv("SPINDLE_MINICLUSTER_KERBEROS") != "1" {
		t.Skip("no Kerberos-secured cluster with short-lived delegation tokens (scripts/minicluster.sh start --kerberos dfs.namenode.delegation.token.max-lifetime=45000)")
	}
	c := ConnectKerberos(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tok, err := c.FS.DelegationToken(ctx, os.Getenv("SPINDLE_MINICLUSTER_PRINCIPAL"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := creds.ParseDelegation(tok.Identifier)
	if err != nil {
		t.Fatal(err)
	}
	life := d.Max.Sub(d.Issued)
	if life > MaxShortLifetime {
		if required {
			t.Fatalf("%s=required, but the cluster's delegation tokens live %v (dfs.namenode.delegation.token.max-lifetime), more than %v", EnvTokenLifetimeRequired, life, MaxShortLifetime)
		}
		t.Skipf("the cluster's delegation tokens live %v, more than %v", life, MaxShortLifetime)
	}
	return c, ShortTokens{Lifetime: life, Token: tok}
}

// EnvEncryptedTransferRequired is the variable that makes the tests of
// DataNodes that encrypt every block fail, not skip, on a cluster whose
// DataNodes do not (scripts/test.sh sets it for its stage of such a
// cluster).
const EnvEncryptedTransferRequired = "SPINDLE_TEST_ENCRYPTED_TRANSFER"

// Encrypts reports whether the cluster's DataNodes encrypt every block
// they send and receive (dfs.encrypt.data.transfer).
func (c *Cluster) Encrypts() bool {
	return strings.EqualFold(strings.TrimSpace(c.Conf.GetDefault("dfs.encrypt.data.transfer", "false")), "true")
}

// ConnectEncrypted is ConnectKerberos for the tests of DataNodes that
// encrypt every block, with AES/CTR/NoPadding among their cipher suites.
// It skips on another cluster, or fails when
// SPINDLE_TEST_ENCRYPTED_TRANSFER=required.
func ConnectEncrypted(t testing.TB) *Cluster {
	t.Helper()
	required := os.Getenv(EnvEncryptedTransferRequired) == "required"
	if !required && os.Getenv("SPINDLE_MINICLUSTER_KERBEROS") != "1" {
		t.Skip("no Kerberos-secured cluster whose DataNodes encrypt (scripts/minicluster.sh start --kerberos dfs.encrypt.data.transfer=true dfs.encrypt.data.transfer.cipher.suites=AES/CTR/NoPadding)")
	}
	c := ConnectKerberos(t)
	if suites := c.Conf.GetDefault("dfs.encrypt.data.transfer.cipher.suites", ""); !c.Encrypts() || !strings.Contains(suites, "AES/CTR/NoPadding") {
		if required {
			t.Fatalf("%s=required, but the cluster has dfs.encrypt.data.transfer=%q, cipher suites %q", EnvEncryptedTransferRequired,
				c.Conf.GetDefault("dfs.encrypt.data.transfer", ""), suites)
		}
		t.Skip("the cluster's DataNodes do not encrypt every block with AES")
	}
	return c
}

// TokenRefused says why the cluster's NameNode refuses a connection
// authenticated with tok; nil when it accepts it.
func (c *Cluster) TokenRefused(t testing.TB, tok creds.Token) error {
	t.Helper()
	opts, err := dfs.HDFSOptionsFromConf(c.Conf, "", "")
	if err != nil {
		t.Fatal(err)
	}
	opts.Token = &tok
	h, err := dfs.NewHDFS(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = h.Stat(ctx, "/")
	return err
}

// TempDir creates a fresh HDFS directory for t, removed when t ends, and
// returns its path (not its URI).
func (c *Cluster) TempDir(t testing.TB) string {
	t.Helper()
	var b [6]byte
	rand.Read(b[:])
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir := "/spindle-test/" + name + "-" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.FS.MkdirAll(ctx, dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := c.FS.RemoveAll(ctx, dir); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return dir
}

// HadoopShell runs Hadoop's own FsShell ("hdfs dfs ARGS...") through
// scripts/minicluster.sh and returns its standard output. It skips the
// calling check (not the whole test) by returning ok=false when the
// script or its cluster state is not available.
func HadoopShell(t testing.TB, args ...string) (out []byte, ok bool) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "minicluster.sh")
	if _, err := os.Stat(script); err != nil || os.Getenv("SPINDLE_MINICLUSTER_DIR") == "" {
		t.Logf("not checking with Hadoop's FsShell: scripts/minicluster.sh or SPINDLE_MINICLUSTER_DIR missing")
		return nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script, append([]string{"hdfs", "dfs"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hdfs dfs %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), true
}

// ContainerFiles returns the files named name (stdout, stderr) that the
// mini cluster's NodeManagers keep for the containers of application
// appID (application_<timestamp>_<n>), keyed by container id. It returns
// nothing without SPINDLE_MINICLUSTER_DIR or its ready file: the caller
// decides whether that skips its check.
func ContainerFiles(t testing.TB, appID, name string) map[string]string {
	t.Helper()
	dir := os.Getenv("SPINDLE_MINICLUSTER_DIR")
	if dir == "" {
		return nil
	}
	f, err := os.Open(filepath.Join(dir, "ready"))
	if err != nil {
		t.Logf("no container logs: %v", err)
		return nil
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		if !strings.HasPrefix(k, "nodemanager_") || !strings.HasSuffix(k, "_log_dirs") {
			continue
		}
		for _, d := range strings.Split(v, ",") {
			files, _ := filepath.Glob(filepath.Join(d, appID, "*", name))
			for _, p := range files {
				if b, err := os.ReadFile(p); err == nil {
					out[filepath.Base(filepath.Dir(p))] = string(b)
				}
			}
		}
	}
	return out
}

// Build builds the Go package pkg (an import path) into a temporary
// directory of t and returns the binary's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	return BuildInto(t, pkg, t.TempDir())
}

// BuildInto is Build into dir, for a binary that outlives t.
func BuildInto(t testing.TB, pkg, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, filepath.Base(pkg))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// JobName is base made unique to this run of the tests ("base-" and 12
// hex digits), for a local job whose processes KillTask must find: two
// runs of the same tests on one machine (two checkouts, or CI beside a
// developer) would otherwise kill each other's tasks.
func JobName(base string) string {
	var b [6]byte
	rand.Read(b[:])
	return base + "-" + hex.EncodeToString(b[:])
}

// KillTask sends SIGKILL to the program of role and rank (DMLC_ROLE,
// DMLC_TASK_ID; rank is ignored for the scheduler, and role "" matches
// any program of the job, such as its ApplicationMaster) of one job on this
// machine, as the kernel's OOM killer or an operator would: the program
// itself, not a shell around it. The job's processes are those with an
// environment entry starting with job: ContainerOf(appID) for the
// containers of a YARN application, or "SPINDLE_JOB_NAME=<name>" for a
// local job with a name no other job's starts with (JobName). It returns
// the process ids it killed.
func KillTask(t testing.TB, job, role string, rank int) []int {
	t.Helper()
	return SignalTask(t, job, role, rank, syscall.SIGKILL)
}

// SignalTask is KillTask with another signal, such as the SIGTERM with
// which a NodeManager stops a container.
func SignalTask(t testing.TB, job, role string, rank int, sig syscall.Signal) []int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var killed []int
	for _, p := range procs {
		env, err := os.ReadFile(p + "/environ")
		if err != nil {
			continue // gone, or not ours
		}
		vars := map[string]bool{}
		inJob := false
		for _, kv := range strings.Split(string(env), "\x00") {
			vars[kv] = true
			inJob = inJob || strings.HasPrefix(kv, job)
		}
		if !inJob || (role != "" && !vars["DMLC_ROLE="+role]) || (role != "" && role != "scheduler" && !vars["DMLC_TASK_ID="+strconv.Itoa(rank)]) {
			continue
		}
		if exe, err := os.Readlink(p + "/exe"); err != nil || strings.HasSuffix(exe, "/bash") || strings.HasSuffix(exe, "/sh") {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil {
			continue
		}
		if err := syscall.Kill(pid, sig); err == nil {
			killed = append(killed, pid)
		}
	}
	return killed
}

// ContainerOf is the environment entry prefix of the containers of YARN
// application appID, for KillTask.
func ContainerOf(appID string) string {
	return "CONTAINER_ID=container_" + strings.TrimPrefix(appID, "application_") + "_"
}

// WriteFile writes data to path on the cluster's HDFS with opts, within a
// bound of two minutes, failing t with the path on an error.
func (c *Cluster) WriteFile(t testing.TB, path string, data []byte, opts dfs.CreateOptions) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w, err := c.FS.Create(ctx, path, opts)
	if err == nil {
		_, err = w.Write(data)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatalf("upload %s: %v", path, err)
	}
}

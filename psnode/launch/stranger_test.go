package launch_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/internal/nettest"
)

// TestStrangerProcessRefused runs a job (scheduler, server, worker as
// processes, the secret in a keys file) and, before its worker, two
// stranger processes that know every port and take the worker's id but
// not the job secret: one speaking CURVE with keys of its own guess, one
// plain ZeroMQ (--insecure). Neither can register; the job then runs
// with its real worker.
func TestStrangerProcessRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes")
	}
	keys, err := conf.NewJobKeys("", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	keysFile := filepath.Join(t.TempDir(), conf.JobKeysFile)
	if err := conf.WriteJobKeys(keysFile, keys.ForTasks()); err != nil {
		t.Fatal(err)
	}
	common := []string{
		"SPINDLE_TEST_CHILD=kvsum",
		conf.EnvNumWorker + "=1",
		conf.EnvNumServer + "=1",
		conf.EnvRootURI + "=127.0.0.1",
		conf.EnvRootPort + "=" + strconv.Itoa(nettest.FreePort(t)),
		conf.EnvNodeHost + "=127.0.0.1",
		conf.EnvMaxDimension + "=" + strconv.Itoa(maxKey),
		conf.EnvShutdownTimeout + "=30",
	}
	env := func(role string, task int, extra ...string) []string {
		e := append([]string{conf.EnvRole + "=" + role, conf.EnvTaskID + "=" + strconv.Itoa(task)}, common...)
		return append(e, extra...)
	}
	member := []string{conf.EnvJobKeys + "=" + keysFile, conf.EnvRegisterTimeout + "=60"}
	sched := startProc(t, "scheduler", env("scheduler", -1, member...))
	server := startProc(t, "server0", env("server", 0, member...))

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for _, s := range []struct{ name, insecure string }{{"stranger-curve", "0"}, {"stranger-plain", "1"}} {
		p := startProc(t, s.name, env("worker", 0, conf.EnvJobSecret+"=a guess", conf.EnvInsecure+"="+s.insecure,
			conf.EnvRegisterTimeout+"=3"))
		line, err := p.expect(ctx, "START FAILED")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s", s.name, line)
		if !strings.Contains(line, "regist") && !strings.Contains(line, "timeout") && !strings.Contains(line, "deadline") {
			t.Errorf("%s failed for another reason: %s", s.name, line)
		}
	}
	worker := startProc(t, "worker0", env("worker", 0, member...))
	if _, err := worker.expect(ctx, "SUM OK"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*proc{worker, server, sched} {
		if err := p.wait(ctx); err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
	}
}

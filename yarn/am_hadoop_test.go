package yarn_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/yarn"
)

// buildAM builds the test ApplicationMaster (internal/amtest) into a
// temporary directory. The NodeManagers of the test cluster run on this
// machine, so the AM command can name the binary directly.
func buildAM(t *testing.T) string {
	t.Helper()
	return hadooptest.Build(t, "github.com/spindle-ps/spindle/yarn/internal/amtest")
}

// dumpAMLogs prints what the application's containers wrote to standard
// error, from the local log dirs or else from Hadoop's yarn logs.
func dumpAMLogs(t *testing.T, app yarn.ApplicationID) {
	t.Helper()
	logs := hadooptest.ContainerFiles(t, app.String(), "stderr")
	for c, s := range logs {
		t.Logf("%s stderr:\n%s", c, s)
	}
	if len(logs) == 0 {
		if out, ok := yarnCLI(t, "logs", "-applicationId", app.String()); ok {
			t.Logf("yarn logs -applicationId %v:\n%s", app, out)
		}
	}
}

func TestHadoopAMRunsContainers(t *testing.T) {
	_, rm := connectRM(t)
	bin := buildAM(t)
	tests := []struct {
		name      string
		args      []string
		exit      int
		want      yarn.FinalStatus
		wantDiags []string
	}{
		{name: "succeeded", exit: 0, want: yarn.FinalSucceeded, wantDiags: []string{"2 containers exited 0"}},
		{name: "container_exit_3", exit: 3, want: yarn.FinalFailed, wantDiags: []string{"exited with status 3", "container_"}},
		{name: "status_and_stop", args: []string{"-stop"}, want: yarn.FinalSucceeded, wantDiags: []string{"2 containers exited -105"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			app, err := rm.NewApplication(ctx)
			if err != nil {
				t.Fatal(err)
			}
			err = rm.Submit(ctx, yarn.Submission{
				ID:   app.ID,
				Name: "spindle-amtest-" + tt.name,
				Type: "SPINDLE",
				Command: append(append([]string{bin, "-containers", "2", "-container-exit", strconv.Itoa(tt.exit), "-timeout", "3m"},
					tt.args...), "1><LOG_DIR>/stdout", "2><LOG_DIR>/stderr"),
				Env:         map[string]string{"HADOOP_CONF_DIR": os.Getenv("HADOOP_CONF_DIR")},
				Resource:    yarn.Resource{MemoryMB: 128, VCores: 1},
				MaxAttempts: 1,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if t.Failed() {
					dumpAMLogs(t, app.ID)
				}
			})
			r := waitState(ctx, t, rm, app.ID, func(r yarn.ApplicationReport) bool { return r.State.Terminal() })
			t.Logf("final report: state %v, final status %v, diagnostics %q", r.State, r.FinalStatus, r.Diagnostics)
			if r.State != yarn.AppFinished || r.FinalStatus != tt.want {
				t.Errorf("state %v final status %v, want FINISHED %v", r.State, r.FinalStatus, tt.want)
			}
			for _, d := range tt.wantDiags {
				if !strings.Contains(r.Diagnostics, d) {
					t.Errorf("diagnostics %q do not contain %q", r.Diagnostics, d)
				}
			}
			if tt.exit == 0 && tt.args == nil {
				checkHello(t, app.ID)
			}
		})
	}
}

// checkHello checks, where the logs are still available, that each worker
// container printed its greeting.
func checkHello(t *testing.T, app yarn.ApplicationID) {
	t.Helper()
	logs := hadooptest.ContainerFiles(t, app.String(), "stdout")
	hellos := 0
	for c, s := range logs {
		if strings.Contains(s, "hello from "+c) {
			hellos++
		}
	}
	if len(logs) == 0 {
		t.Logf("container stdout no longer on local disk (log aggregation); not checking the greetings")
		return
	}
	t.Logf("container stdout: %v", logs)
	if hellos != 2 {
		t.Errorf("%d containers printed their greeting, want 2: %v", hellos, logs)
	}
}

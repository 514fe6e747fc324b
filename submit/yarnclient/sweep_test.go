package yarnclient

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/yarn"
)

// TestSweepStaging: of the staging directories a submission finds, those
// of applications that ended go; those of applications still running,
// unknown to the ResourceManager, or being submitted, and whatever else
// lies there, stay. Of the directories an application that ended without
// succeeding had made, the empty ones go too, and the claims its
// ApplicationMaster left in the directories it wrote, but not another
// job's.
func TestSweepStaging(t *testing.T) {
	root := t.TempDir()
	apps := map[string]yarn.AppState{
		"application_1700000000000_0001": yarn.AppKilled,
		"application_1700000000000_0002": yarn.AppFinished,
		"application_1700000000000_0003": yarn.AppFailed,
		"application_1700000000000_0004": yarn.AppRunning,
		"application_1700000000000_0005": yarn.AppAccepted,
	}
	// The killed application made an output that stayed empty and a
	// checkpoint directory with a checkpoint; the one that succeeded an
	// empty checkpoint directory, which is its to keep.
	out := t.TempDir()
	made := map[string][]string{
		"application_1700000000000_0001": {"file://" + filepath.Join(out, "model-1"), "file://" + filepath.Join(out, "ckpt-1")},
		"application_1700000000000_0002": {"file://" + filepath.Join(out, "ckpt-2")},
	}
	for _, d := range []string{"model-1", "ckpt-1/1", "ckpt-2"} {
		if err := os.MkdirAll(filepath.Join(out, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	unknown := "application_1700000000000_0006"
	submitting := "application_1700000000000_0007"
	for _, name := range []string{"application_1700000000000_0001", "application_1700000000000_0002", "application_1700000000000_0003",
		"application_1700000000000_0004", "application_1700000000000_0005", unknown, submitting, "logs/" + "application_1700000000000_0001"} {
		if err := os.MkdirAll(filepath.Join(root, name, "lib"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The killed application also claimed the checkpoint directory it
	// made and the user's own; the failed one claimed a directory that
	// another job holds now.
	claimed := map[string][]string{
		"application_1700000000000_0001": {"file://" + filepath.Join(out, "ckpt-1"), "file://" + filepath.Join(out, "ckpt-user")},
		"application_1700000000000_0003": {"file://" + filepath.Join(out, "held")},
	}
	claims := map[string]string{
		"ckpt-1":    "container_1700000000000_0001_01_000001",
		"ckpt-user": "container_e3_1700000000000_0001_02_000001",
		"held":      "container_1700000000000_0009_01_000001",
	}
	for d, container := range claims {
		if err := os.MkdirAll(filepath.Join(out, d), 0o755); err != nil {
			t.Fatal(err)
		}
		claim := `{"job":"j","host":"elsewhere.example","pid":7,"container":"` + container + `","since":"2026-11-28T15:00:00Z"}`
		if err := os.WriteFile(filepath.Join(out, d, claimFile), []byte(claim), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for app := range apps {
		if err := (jobDirs{made: made[app], claimed: claimed[app]}).write(t.Context(), dfs.Local{}, filepath.Join(root, app)); err != nil {
			t.Fatal(err)
		}
	}
	// A file with an application's name is no staging directory.
	if err := os.WriteFile(filepath.Join(root, "application_1700000000000_0008"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	asked := map[string]bool{}
	report := func(_ context.Context, id yarn.ApplicationID) (yarn.ApplicationReport, error) {
		asked[id.String()] = true
		st, ok := apps[id.String()]
		if !ok {
			return yarn.ApplicationReport{}, errors.New("ApplicationNotFoundException")
		}
		r := yarn.ApplicationReport{ID: id, State: st}
		if st == yarn.AppFinished {
			r.FinalStatus = yarn.FinalSucceeded
		}
		return r, nil
	}
	app, err := yarn.ParseApplicationID(submitting)
	if err != nil {
		t.Fatal(err)
	}
	sweepStaging(t.Context(), dfs.Local{}, root, app, report, localResolver(), quiet())
	for d, gone := range map[string]bool{"model-1": true, "ckpt-1/1": false, "ckpt-2": false,
		"ckpt-1/" + claimFile: true, "ckpt-user/" + claimFile: true, "ckpt-user": false, "held/" + claimFile: false} {
		if _, err := os.Stat(filepath.Join(out, d)); gone != errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s, which an application made or claimed: Stat = %v, want it gone %v", d, err, gone)
		}
	}

	for name, gone := range map[string]bool{
		"application_1700000000000_0001": true, "application_1700000000000_0002": true, "application_1700000000000_0003": true,
		"application_1700000000000_0004": false, "application_1700000000000_0005": false, unknown: false, submitting: false,
		"logs/application_1700000000000_0001": false, "application_1700000000000_0008": false,
	} {
		_, err := os.Stat(filepath.Join(root, name))
		if gone != errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: Stat = %v, want it gone %v", name, err, gone)
		}
	}
	if asked[submitting] {
		t.Error("the application being submitted was asked about")
	}
}

// claimFile is the name of a job's claim in a directory it writes.
const claimFile = "_spindle_job"

func localResolver() job.Resolver { return dfs.NewResolver(conf.HadoopConf{}, "") }

// TestSweepStagingBounded: a submission asks about sweepMax applications
// at most, the newest first.
func TestSweepStagingBounded(t *testing.T) {
	root := t.TempDir()
	var newest yarn.ApplicationID
	for i := range sweepMax + 10 {
		id := yarn.ApplicationID{ClusterTimestamp: 1700000000000, ID: int32(i + 1)}
		newest = id
		if err := os.Mkdir(filepath.Join(root, id.String()), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var asked []yarn.ApplicationID
	report := func(_ context.Context, id yarn.ApplicationID) (yarn.ApplicationReport, error) {
		asked = append(asked, id)
		return yarn.ApplicationReport{ID: id, State: yarn.AppRunning}, nil
	}
	sweepStaging(t.Context(), dfs.Local{}, root, yarn.ApplicationID{}, report, localResolver(), quiet())
	if len(asked) != sweepMax || asked[0] != newest {
		t.Fatalf("asked about %d applications starting with %v, want %d starting with %v", len(asked), asked[0], sweepMax, newest)
	}
}

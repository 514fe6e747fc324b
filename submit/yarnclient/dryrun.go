package yarnclient

import (
	"fmt"
	"os"
	"path"
	"sort"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/yarnam"
	"github.com/spindle-ps/spindle/yarn"
)

// DryRun is what Submit would do for a job, found without a cluster:
// nothing is asked of the ResourceManager and nothing is staged.
type DryRun struct {
	// Name, Type, Queue, Priority, Tags and MaxAttempts are the
	// application's.
	Name, Type, Queue string
	Priority          int32
	Tags              []string
	MaxAttempts       int32
	// Staging is where the files would be staged; the application's id
	// is shown as <application-id>.
	Staging string
	// AM is the ApplicationMaster's container.
	AMResource yarn.Resource
	AMCommand  []string
	AMEnv      []string // KEY=VALUE, sorted
	// Files are every file that would be staged, sorted by name.
	Files []StagedFile
	// Tasks are the tasks' containers, in the order the job starts them.
	Tasks []yarnam.TaskLaunch
}

// StagedFile is a local file Submit would stage.
type StagedFile struct {
	// Name is its link name in the containers' working directory.
	Name string
	// Local is its local path; "" for job.json, written at submission.
	Local string
	// Size is its size in bytes (-1 for job.json).
	Size int64
	// Archive marks a file the NodeManager unpacks (ARCHIVE) into the
	// directory Name.
	Archive bool
	// AMOnly marks a file only the ApplicationMaster gets.
	AMOnly bool
}

// Plan returns what Submit would do for spec with opts, without
// contacting the cluster: the application, the ApplicationMaster's
// container, the files that would be staged (with their sizes) and the
// launch context of every task's container.
func Plan(spec job.JobSpec, opts Options) (DryRun, error) {
	if err := validate(spec); err != nil {
		return DryRun{}, err
	}
	opts = withDefaults(opts)
	self := opts.Executable
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return DryRun{}, fmt.Errorf("yarnclient: find the ps-submit binary to ship: %w", err)
		}
	}
	lookup := opts.Lookup
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	h, err := conf.LoadHadoop(lookup)
	if err != nil {
		return DryRun{}, err
	}
	items, cmd, err := stagePlan(spec, self, lookup)
	if err != nil {
		return DryRun{}, err
	}
	d := DryRun{Name: appName(spec), Type: ApplicationType, Queue: spec.Queue, Priority: int32(opts.Priority),
		Tags: opts.Tags, MaxAttempts: int32(opts.AMMaxAttempts), Staging: stagingDirName(h.User, "<application-id>"),
		AMResource: yarn.Resource{MemoryMB: int64(opts.AMMemoryMB), VCores: int32(opts.AMCores)},
		AMCommand:  amCommand()}
	for k, v := range amEnv(h.User) {
		d.AMEnv = append(d.AMEnv, k+"="+v)
	}
	sort.Strings(d.AMEnv)
	taskRes := map[string]yarn.LocalResource{}
	for _, it := range items {
		fi, err := os.Stat(it.Local)
		if err != nil {
			return DryRun{}, fmt.Errorf("yarnclient: stage %s: %w", it.Local, err)
		}
		d.Files = append(d.Files, StagedFile{Name: it.Name, Local: it.Local, Size: fi.Size(), Archive: it.Archive, AMOnly: it.AMOnly})
		if !it.AMOnly {
			taskRes[it.Name] = yarn.LocalResource{Archive: it.Archive}
		}
	}
	d.Files = append(d.Files, StagedFile{Name: amJobFile, Size: -1, AMOnly: true})
	if h.Security.Kerberos && opts.Login.Keytab != "" {
		// Shipped so that the AM can obtain new delegation tokens.
		fi, err := os.Stat(opts.Login.Keytab)
		if err != nil {
			return DryRun{}, fmt.Errorf("yarnclient: --keytab: %w", err)
		}
		d.Files = append(d.Files, StagedFile{Name: amKeytab, Local: opts.Login.Keytab, Size: fi.Size(), AMOnly: true})
	}
	sort.Slice(d.Files, func(a, b int) bool { return d.Files[a].Name < d.Files[b].Name })
	ts := spec
	ts.Command = cmd
	d.Tasks, err = yarnam.PlanLaunches(ts, yarnam.Options{Resources: taskRes, Env: taskEnv(),
		AllocationTimeout: opts.AllocationTimeout})
	if err != nil {
		return DryRun{}, err
	}
	return d, nil
}

// appName is the application's name: the job's, else the command's base
// name.
func appName(spec job.JobSpec) string {
	if spec.Name != "" {
		return spec.Name
	}
	return path.Base(spec.Command[0])
}

// amCommand is the ApplicationMaster's command: ps-submit in AM mode on
// job.json.
func amCommand() []string {
	return []string{"./" + amBinaryName, AMMode, amJobFile, "1><LOG_DIR>/stdout", "2><LOG_DIR>/stderr"}
}

// amEnv is the ApplicationMaster's environment.
func amEnv(user string) map[string]string {
	return map[string]string{"LD_LIBRARY_PATH": "./" + amLibDir, conf.EnvHadoopUserName: user}
}

// taskEnv is what the ApplicationMaster adds to every task's environment.
func taskEnv() []string { return []string{"LD_LIBRARY_PATH=./" + amLibDir} }

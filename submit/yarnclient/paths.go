package yarnclient

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/yarn"
)

// validate is spec.Validate and CheckSpec.
func validate(spec job.JobSpec) error {
	return errors.Join(spec.Validate(), CheckSpec(spec))
}

// CheckSpec reports what a job on YARN needs beyond spec.Validate, each
// as a job.FieldError: its paths name their file system (checkPaths), a
// command given as a relative path is there to ship (checkCommand), and
// its --files are files.
func CheckSpec(spec job.JobSpec) error {
	errs := []error{checkPaths(spec), checkCommand(spec)}
	for _, f := range spec.Files {
		if fi, err := os.Stat(f); err == nil && fi.IsDir() {
			errs = append(errs, &job.FieldError{Field: "Files", Value: f,
				Problem: "a directory, and YARN ships files: pack it into a .tar.gz or .zip and give that with --archives"})
		}
	}
	return errors.Join(errs...)
}

// checkCommand refuses a command given as a relative path with a slash
// ("./train.sh", "bin/ps-lr") that is not a file here, unless an
// --archives directory or a --files file of the same first element
// provides it. Such a command is looked for in the container's working
// directory, where only what ps-submit ships is; each of the job's
// attempts would fail at once. An absolute path may name a program
// installed on the nodes, and a bare name one on their PATH: both are
// left to the nodes.
func checkCommand(spec job.JobSpec) error {
	if len(spec.Command) == 0 {
		return nil
	}
	exe := spec.Command[0]
	if !strings.Contains(exe, "/") || filepath.IsAbs(exe) || isRegularFile(exe) {
		return nil
	}
	first, _, _ := strings.Cut(filepath.Clean(exe), "/")
	for _, f := range spec.Files {
		if filepath.Base(f) == first {
			return nil
		}
	}
	for _, a := range spec.Archives {
		if _, name, err := job.ArchiveName(a); err == nil && name == first {
			return nil
		}
	}
	problem := "no such file here to ship, and no --files or --archives entry named " + strconv.Quote(first) +
		" provides it in the containers' working directory"
	if _, err := os.Stat(exe); err == nil {
		problem = "not a regular file, which is what ps-submit ships"
	}
	return &job.FieldError{Field: "Command", Value: exe, Problem: problem}
}

// checkPaths refuses the inputs, output and checkpoint directory given as
// paths without a scheme. To Spindle such a path is this machine's file
// system (dfs.ParseURI), which a task in a YARN container on another
// machine does not see: a relative one is resolved in the container's
// working directory, and an absolute one on each task's own node, so the
// servers would write the model's parts on the disks of their nodes. A
// Hadoop user may also mean HDFS by it, as Hadoop's own tools do. Either
// way the job would fail late or scatter its output; naming the file
// system explicitly (hdfs://, or file:// for one every node mounts) is
// asked for before anything is staged.
func checkPaths(spec job.JobSpec) error {
	var errs []error
	check := func(field, p string) {
		if p == "" || dfs.HasScheme(p) {
			return
		}
		errs = append(errs, &job.FieldError{Field: field, Value: p, Problem: "a path without a scheme means this machine's " +
			"file system, which the job's containers do not see: give hdfs:///path for HDFS, or file:///path for a " +
			"file system mounted alike on every node"})
	}
	for _, in := range spec.Inputs {
		check("Inputs", in)
	}
	check("Output", spec.Output)
	check("CheckpointDir", spec.CheckpointDir)
	return errors.Join(errs...)
}

// checkFits refuses containers larger than the largest the cluster grants
// (max, as the ResourceManager gave it for a new application): YARN would
// refuse them only once the ApplicationMaster asks, after everything was
// staged and the application started. Each is a FieldError naming the
// field (or the Options field, for the ApplicationMaster's).
func checkFits(spec job.JobSpec, opts Options, max yarn.Resource) error {
	if max.MemoryMB <= 0 || max.VCores <= 0 {
		return nil // not told
	}
	var errs []error
	fits := func(memField, coresField string, mem, cores int64) {
		limit := fmt.Sprintf("more than the largest container this cluster grants (%d MB, %d vcores)", max.MemoryMB, max.VCores)
		if mem > max.MemoryMB {
			errs = append(errs, &job.FieldError{Field: memField, Value: fmt.Sprintf("%d MB", mem), Problem: limit})
		}
		if cores > int64(max.VCores) {
			errs = append(errs, &job.FieldError{Field: coresField, Value: fmt.Sprint(cores), Problem: limit})
		}
	}
	fits("AMMemoryMB", "AMCores", int64(opts.AMMemoryMB), int64(opts.AMCores))
	if spec.HasScheduler() {
		fits("ServerMemoryMB", "ServerCores", int64(spec.MemoryMB(conf.RoleServer)), int64(spec.Cores(conf.RoleServer)))
	}
	fits("WorkerMemoryMB", "WorkerCores", int64(spec.MemoryMB(conf.RoleWorker)), int64(spec.Cores(conf.RoleWorker)))
	return errors.Join(errs...)
}

package submit

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/spindle-ps/spindle/submit/yarnclient"
)

// dryRunYARN writes what a YARN submission of the job would do — the
// application, the ApplicationMaster's container, the files that would
// be staged with their sizes, and every task's container with its
// resources, command, environment (secrets redacted) and local resources
// — without contacting the cluster.
func (o *Options) dryRunYARN(w *bufio.Writer) error {
	d, err := yarnclient.Plan(o.JobSpec(), yarnclient.Options{
		Lookup:            o.LookupEnv,
		AMMemoryMB:        o.AMMemoryMB,
		AMCores:           o.AMCores,
		AMMaxAttempts:     o.MaxAppAttempts,
		Priority:          o.Priority,
		Tags:              o.TagList,
		AllocationTimeout: o.AllocationTimeoutDuration,
	})
	if err != nil {
		return err
	}
	writeYARNPlan(w, d)
	return nil
}

// writeYARNPlan writes d; nothing of it is submitted or staged.
func writeYARNPlan(w *bufio.Writer, d yarnclient.DryRun) {
	fmt.Fprintf(w, "\nYARN application %s (nothing is submitted or staged by --dry-run)\n", d.Name)
	fmt.Fprintf(w, "  type %s, queue %s, priority %d, AM attempts %d, tags %s\n", d.Type, d.Queue, d.Priority, d.MaxAttempts, orNone(strings.Join(d.Tags, ",")))
	fmt.Fprintf(w, "  staging  %s/\n", d.Staging)

	fmt.Fprintf(w, "\nfiles to stage (%d):\n", len(d.Files))
	for _, f := range d.Files {
		kind, to := "FILE", "AM and tasks"
		if f.Archive {
			kind = "ARCHIVE"
		}
		if f.AMOnly {
			to = "AM"
		}
		size, from := fmt.Sprintf("%d bytes", f.Size), f.Local
		if f.Local == "" {
			size, from = "-", "(written at submission)"
		}
		fmt.Fprintf(w, "  %-24s %-8s %-14s %-12s %s\n", f.Name, kind, size, to, from)
	}

	fmt.Fprintf(w, "\ncontainer application-master: %d MB, %d vcores\n", d.AMResource.MemoryMB, d.AMResource.VCores)
	fmt.Fprintf(w, "  command  %s\n", strings.Join(d.AMCommand, " "))
	for _, kv := range d.AMEnv {
		fmt.Fprintf(w, "  env      %s\n", redactSetting(kv))
	}
	for _, f := range d.Files {
		fmt.Fprintf(w, "  resource %s\n", f.Name)
	}

	fmt.Fprintf(w, "\ntask containers (%d), asked for at once; each task's environment as the AM sets it:\n", len(d.Tasks))
	for _, t := range d.Tasks {
		fmt.Fprintf(w, "\ncontainer %s: priority %d, %d MB, %d vcores\n", t.Task, t.Priority, t.Resource.MemoryMB, t.Resource.VCores)
		fmt.Fprintf(w, "  command  %s\n", strings.Join(t.Commands, " "))
		for _, kv := range t.Env {
			fmt.Fprintf(w, "  env      %s\n", redactSetting(kv))
		}
		for _, r := range t.Resources {
			fmt.Fprintf(w, "  resource %s\n", r)
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

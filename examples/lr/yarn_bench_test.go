package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/spindle-ps/spindle/internal/hadooptest"
	"github.com/spindle-ps/spindle/job"
	"github.com/spindle-ps/spindle/job/local"
	"github.com/spindle-ps/spindle/tracker"
)

// BenchmarkHadoopTrain runs the same synchronous 2×2 LR job (3 epochs of
// the generated 200,000 rows, read from HDFS, the model written to HDFS)
// on YARN (yarnclient.Submit, as ps-submit --cluster yarn: the ApplicationMaster
// and every task in a container of the mini cluster on this machine) and
// with the local launcher (local.Run: the tracker in this process, the
// tasks as child processes); every op runs both, one after the other. It
// reports, for each (yarn-…, local-…), the means per job of:
//
//   - examples/s: the training records over the training phase, from the
//     first worker's first request for input to the committed model
//     (the manifest's first_data and created);
//   - wall-examples/s: the same records over the whole job, from submit
//     to the client's return;
//   - s-to-first-batch: from submit until a worker first asked for input,
//     about to train its first batch (every task started, every node
//     registered);
//   - s-wall: from submit to the client's return;
//
// and yarn/local-examples/s, the ratio of the training-phase rates.
//
// Run with -benchtime=1x; every op is a whole job (scripts/bench-lr-yarn.sh).
func BenchmarkHadoopTrain(b *testing.B) {
	const epochs = 3
	c := hadooptest.Connect(b)
	dir := uploadData(b, c)
	spec := func(name string) job.JobSpec {
		s := lrSpec(dir, name)
		s.Command = []string{psLR, "--epochs", fmt.Sprint(epochs)}
		s.MaxAttempts, s.Overwrite = 1, true
		return s
	}
	type sums struct{ train, first, wall time.Duration }
	got := map[string]*sums{"yarn": {}, "local": {}}
	for i := 0; i < b.N; i++ {
		// Alternating, so that both see the same machine.
		for _, impl := range []string{"yarn", "local"} {
			s := spec("model-" + impl)
			out := s.Output
			start := time.Now()
			var err error
			switch impl {
			case "yarn":
				err = runYARN(b, s, nil).err
			case "local":
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				_, err = local.Run(ctx, s, local.Options{Environ: os.Environ(), Log: quietLog(),
					Planner: tracker.InputPlanner(c.Resolver), Resolver: c.Resolver})
				cancel()
			}
			wall := time.Since(start)
			if err != nil {
				b.Fatalf("%s job: %v", impl, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			m, err := readManifestOf(ctx, c, out)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			tr := m.Training
			if tr == nil || tr.FirstData.IsZero() {
				b.Fatalf("the manifest of %s does not say when training began", out)
			}
			g := got[impl]
			g.wall += wall
			g.first += tr.FirstData.Sub(start)
			g.train += m.Created.Sub(tr.FirstData)
		}
	}
	n := float64(b.N)
	records := float64(epochs * rows)
	for impl, g := range got {
		b.ReportMetric(records*n/g.train.Seconds(), impl+"-examples/s")
		b.ReportMetric(records*n/g.wall.Seconds(), impl+"-wall-examples/s")
		b.ReportMetric(g.first.Seconds()/n, impl+"-s-to-first-batch")
		b.ReportMetric(g.wall.Seconds()/n, impl+"-s-wall")
	}
	b.ReportMetric(got["local"].train.Seconds()/got["yarn"].train.Seconds(), "yarn/local-examples/s")
	b.ReportMetric(0, "ns/op")
}

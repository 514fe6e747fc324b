// Command early is examples/quickstart with one fault: worker 1's first
// process exits 0 without finalizing its node, as a program with a stray
// os.Exit(0) does: in the middle of epoch 1, or with EARLY=start before
// it starts its node. Its successor joins the job, or rejoins the
// synchronous steps where the first one left them.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/feed"
	"github.com/spindle-ps/spindle/io/model"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/store"
	"github.com/spindle-ps/spindle/psnode/transport"
)

const epochs, steps = 3, 20

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "early:", err)
		// 1, or conf.ExitRestartJob for an error that asks the launcher
		// to restart the whole job from its checkpoint.
		os.Exit(feed.ExitStatus(err))
	}
}

func run(ctx context.Context) error {
	if os.Getenv("EARLY") == "start" && os.Getenv(conf.EnvRole) == "worker" && os.Getenv(conf.EnvTaskID) == "1" && os.Getenv(conf.EnvNumAttempt) == "0" {
		os.Exit(0)
	}
	// The job as ps-submit set it up: its configuration, the file
	// systems (local paths and hdfs://), this task's node, the tracker.
	task, err := feed.StartTask(ctx, os.LookupEnv, os.Environ(), logrus.NewEntry(logrus.New()))
	if err != nil {
		return err
	}
	defer task.Close()
	n := task.Node

	// Where the tables go: checkpoints, the tracker that commits them,
	// the checkpoint to restore from, the model.
	tables, err := task.Tables(model.PartText)
	if err != nil {
		return err
	}
	// Every role declares the same tables; servers serve them.
	sgd, err := store.NewUpdater[float32]("sgd", map[string]float64{"lr": 0.1})
	if err != nil {
		return err
	}
	w, err := psnode.NewTable(tables, psnode.TableSpec[float32]{Name: "w", Width: 1, Updater: sgd, Partitioner: "hash", Sync: true})
	if err != nil {
		return err
	}
	if n.Role() == transport.RoleWorker {
		if err := train(ctx, n, tables, w, task.Config.Job); err != nil {
			return err
		}
	}
	if err := tables.Finish(ctx); err != nil { // servers write the model
		return err
	}
	return n.Finalize(ctx)
}

// exitEarly reports whether this process is worker 1's first, which
// leaves in the middle of epoch 1 with status 0 and without finalizing.
func exitEarly(n *psnode.Node, epoch, step int) bool {
	return os.Getenv("EARLY") == "" && n.Rank() == 1 && os.Getenv(conf.EnvNumAttempt) == "0" && epoch == 1 && step == steps/2
}

// train pulls the weights, pushes the gradient of ½(w[k] - k/10)² in
// synchronous steps, and after each epoch worker 0 takes a checkpoint.
// A worker that replaces a dead one goes on after the dead one's last
// step the servers received.
func train(ctx context.Context, n *psnode.Node, tables *psnode.Tables, w *psnode.Table[float32], job conf.Job) error {
	keys := []uint64{1, 2, 3, 4}
	var weights []float32
	grads := make([]float32, len(keys))
	first, resume, err := feed.Rejoin(ctx, tables, job.ResumeEpoch)
	if err != nil {
		return err
	}
	for epoch := first; epoch < epochs; epoch++ {
		from := 0
		if resume != nil && resume.Epoch == epoch {
			from = resume.Batches
			if from == psnode.AllBatches {
				from = steps
			}
		}
		for step := from; step < steps; step++ {
			if exitEarly(n, epoch, step) {
				os.Exit(0)
			}
			id, err := w.Pull(ctx, keys, &weights)
			if err == nil {
				err = w.Wait(ctx, id)
			}
			if err != nil {
				return err
			}
			for i, k := range keys {
				grads[i] = weights[i] - float32(k)/10
			}
			if id, err = w.PushStep(ctx, epoch, step, keys, grads); err == nil {
				err = w.Wait(ctx, id)
			}
			if err != nil {
				return err
			}
		}
		if err := tables.EndEpoch(ctx, epoch); err != nil {
			return err
		}
		if n.Rank() == 0 && job.CheckpointDir != "" {
			if err := tables.Checkpoint(ctx, epoch+1); err != nil {
				return err
			}
		}
	}
	return nil
}

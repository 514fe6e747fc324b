// Command quickstart is the program of the README's "Writing a program
// against psnode": one synchronous table of weights, trained by every
// worker with SGD towards w[k] = k/10, checkpointed after each epoch and
// written as the model at the end. Run it with ps-submit:
//
//	ps-submit --cluster local -n 2 -s 2 --output /tmp/model \
//	    --checkpoint-dir /tmp/ckpt --checkpoint-interval 1 -- ./quickstart
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
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		// 1; conf.ExitRestartJob for an error that asks the launcher to
		// restart the whole job from its checkpoint; conf.ExitBadInput
		// for input at fault (a malformed record, a corrupt gzip file),
		// which the launcher does not start the task again for.
		os.Exit(feed.ExitStatus(err))
	}
}

func run(ctx context.Context) error {
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
		if n.Rank() == 0 { // the job's progress (ps-submit status, YARN) counts epochs
			if err := task.Tracker.PlanEpochs(ctx, epochs); err != nil {
				return err
			}
		}
		if err := train(ctx, n, tables, w, task.Config.Job); err != nil {
			return err
		}
	}
	if err := tables.Finish(ctx); err != nil { // servers write the model
		return err
	}
	return n.Finalize(ctx)
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

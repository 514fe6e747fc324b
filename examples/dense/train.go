package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/examples/dense/dense"
	"github.com/spindle-ps/spindle/examples/internal/subcmd"
	"github.com/spindle-ps/spindle/feed"
	"github.com/spindle-ps/spindle/io/ckpt"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/collective"
	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/tracker"
)

// trainFlags are ps-dense's training options; every process of a job
// gets the same ones.
type trainFlags struct {
	cfg         dense.Config
	epochs      int
	classes     int
	test        string
	stepTimeout time.Duration
	// dieAfter is a fault-injection hook for tests: "RANK:E" makes
	// worker RANK's first attempt kill itself (SIGKILL) as epoch E
	// begins.
	dieAfter string
}

func parseTrainFlags(args []string) (trainFlags, error) {
	f := trainFlags{cfg: dense.Config{Adam: dense.DefaultAdam()}}
	fl := flag.NewFlagSet("ps-dense", flag.ContinueOnError)
	subcmd.Usage(fl, trainUsage)
	fl.StringVar(&f.cfg.Mode, "mode", dense.ModePlain, "plain (all-reduce the gradient; every worker holds the whole optimizer state) or zero (reduce-scatter; each worker holds its shard)")
	fl.IntVar(&f.epochs, "epochs", 5, "passes over the input")
	fl.IntVar(&f.cfg.Batch, "batch", 256, fmt.Sprintf("global batch: examples per step over all workers, at most %d", dense.MaxBatch))
	fl.IntVar(&f.classes, "classes", 4, "classes: labels are 0..classes-1")
	fl.Uint64Var(&f.cfg.Seed, "seed", 1, "seed of the initial parameters and of each epoch's order")
	fl.Float64Var(&f.cfg.Adam.LR, "lr", f.cfg.Adam.LR, "Adam learning rate")
	fl.Float64Var(&f.cfg.Adam.Beta1, "beta1", f.cfg.Adam.Beta1, "Adam first-moment decay")
	fl.Float64Var(&f.cfg.Adam.Beta2, "beta2", f.cfg.Adam.Beta2, "Adam second-moment decay")
	fl.Float64Var(&f.cfg.Adam.Eps, "eps", f.cfg.Adam.Eps, "Adam epsilon")
	fl.StringVar(&f.test, "test", "", "held-out csv file (local or hdfs://) to report accuracy on after each epoch")
	fl.DurationVar(&f.stepTimeout, "step-timeout", 5*time.Minute, "longest wait for one collective (the slowest worker's step); the worker fails past it")
	fl.StringVar(&f.dieAfter, "die-after", "", "testing: RANK:E makes that worker's first attempt SIGKILL itself as epoch E begins")
	if err := subcmd.Parse(fl, args); err != nil {
		return f, err
	}
	var errs []error
	if err := f.cfg.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--mode, --batch or Adam's flags: %w", err))
	}
	if f.epochs < 1 {
		errs = append(errs, fmt.Errorf("--epochs %d: need at least 1", f.epochs))
	}
	if f.classes < 2 || f.classes > dense.MaxClasses {
		errs = append(errs, fmt.Errorf("--classes %d: want 2..%d", f.classes, dense.MaxClasses))
	}
	if f.stepTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--step-timeout %v: must be positive", f.stepTimeout))
	}
	return f, errors.Join(errs...)
}

func trainMain(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool), environ []string) error {
	f, err := parseTrainFlags(args)
	if err != nil {
		return err
	}
	l := logrus.New()
	l.Out = stderr
	log := logrus.NewEntry(l)
	task, err := feed.StartTask(ctx, lookup, environ, log)
	if err != nil {
		return err
	}
	defer task.Close()
	n, cfg := task.Node, task.Config
	if n.NumServers() != 0 {
		return fmt.Errorf("ps-dense trains without servers, and the job has %d: run it with ps-submit -s 0", n.NumServers())
	}
	if n.Role() == transport.RoleWorker {
		if task.Tracker == nil {
			return errors.New("no tracker (SPINDLE_TRACKER_ADDR): run ps-dense through ps-submit")
		}
		w := &worker{n: n, f: f, tc: task.Tracker, res: task.Files, out: stdout, job: cfg.Job, attempt: cfg.PS.NumAttempt}
		if err := w.train(ctx); err != nil {
			if errors.Is(err, psnode.ErrNodeDead) {
				// A peer is gone: the launcher starts the job again.
				return fmt.Errorf("%w: %w", psnode.ErrSyncWorkerDied, err)
			}
			return err
		}
	}
	// Every node waits here until the workers are done.
	if err := n.Barrier(ctx, transport.AllGroups); err != nil {
		return err
	}
	return n.Finalize(ctx)
}

// worker trains on its part of every global batch.
type worker struct {
	n       *psnode.Node
	f       trainFlags
	tc      *tracker.Client
	res     *dfs.Resolver
	out     io.Writer
	job     conf.Job
	attempt int

	comm *groupComm
	tr   *dense.Trainer
	test *dense.Data
}

func (w *worker) train(ctx context.Context) error {
	g, err := collective.New(w.n, collective.Options{})
	if err != nil {
		return err
	}
	w.comm = &groupComm{g: g, timeout: w.f.stepTimeout}
	rank := g.Rank()
	data, plan, counts, err := loadPlan(ctx, w.tc, w.res, w.f.classes)
	if err != nil {
		return fmt.Errorf("input: %w", err)
	}
	if rank == 0 && w.f.test != "" {
		if w.test, err = readAll(ctx, w.res, w.f.test, w.f.classes); err != nil {
			return fmt.Errorf("--test: %w", err)
		}
	}
	if w.tr, err = dense.NewTrainer(w.f.cfg, w.comm, data, w.f.classes); err != nil {
		return err
	}
	if w.job.ResumeFrom != "" {
		if err := w.restore(ctx); err != nil {
			return fmt.Errorf("restore %s: %w", w.job.ResumeFrom, err)
		}
	}
	lo, hi := w.tr.OptimizerShard()
	full := int64(2 * 8 * len(w.tr.Model.W))
	if rank == 0 {
		fmt.Fprintf(w.out, "%d workers, mode %s: %d examples of %d features, %d parameters; optimizer state per worker %d bytes (whole: %d bytes)\n",
			g.Size(), w.f.cfg.Mode, data.Len(), data.D, len(w.tr.Model.W), w.tr.OptimizerBytes(), full)
	}
	die, err := feed.DieAfter(w.f.dieAfter, rank, w.attempt) // counts epochs here, not shards
	if err != nil {
		return fmt.Errorf("--die-after: %w", err)
	}
	dueEvery, dueAfter, err := parseInterval(w.job.CheckpointInterval)
	if err != nil {
		return fmt.Errorf("checkpoint interval: %w", err)
	}
	if rank == 0 { // the job's progress is measured against it
		if err := w.tc.PlanEpochs(ctx, w.f.epochs); err != nil {
			return err
		}
	}
	lastCkpt := time.Now()
	for epoch := w.job.ResumeEpoch; epoch < w.f.epochs; epoch++ {
		if die != nil {
			die(epoch)
		}
		st, err := w.tr.Epoch(ctx, epoch)
		if err != nil {
			return err
		}
		// This worker's shards of the plan, for the tracker's count.
		for i := rank; i < len(plan); i += g.Size() {
			if err := w.tc.ShardDone(ctx, epoch, plan[i].ID, rank, w.attempt, counts[i], nil); err != nil {
				return fmt.Errorf("shard %d done: %w", plan[i].ID, err)
			}
		}
		m := map[string]float64{
			"optimizer_bytes":     float64(w.tr.OptimizerBytes()),
			"optimizer_bytes_sum": float64(w.tr.OptimizerBytes()),
			"optimizer_shard":     float64(hi - lo),
		}
		if rank == 0 {
			m["train_loss"], m["train_accuracy"], m["examples"] = st.Loss, st.Accuracy, float64(st.Examples)
			m["optimizer_bytes_whole"] = float64(full)
			if w.test != nil {
				acc, loss, err := w.tr.Model.Evaluate(w.test)
				if err != nil {
					return fmt.Errorf("--test: %w", err)
				}
				m["test_accuracy"], m["test_loss"] = acc, loss
				fmt.Fprintf(w.out, "epoch %d: train loss %.4f, accuracy %.4f; test accuracy %.4f, loss %.4f\n", epoch, st.Loss, st.Accuracy, acc, loss)
			} else {
				fmt.Fprintf(w.out, "epoch %d: train loss %.4f, accuracy %.4f\n", epoch, st.Loss, st.Accuracy)
			}
		}
		if err := w.tc.ReportMetrics(ctx, epoch, rank, m); err != nil {
			return err
		}
		// Worker 0 decides whether a checkpoint is due, for everyone.
		due := []int64{0}
		if rank == 0 && w.job.CheckpointDir != "" &&
			((dueEvery > 0 && (epoch+1)%dueEvery == 0) || (dueAfter > 0 && time.Since(lastCkpt) >= dueAfter)) {
			due[0] = 1
		}
		if err := w.comm.Broadcast(ctx, due); err != nil {
			return err
		}
		if due[0] == 1 {
			if err := w.checkpoint(ctx, epoch+1); err != nil {
				return fmt.Errorf("checkpoint after epoch %d: %w", epoch, err)
			}
			// Nobody goes on before it is committed.
			if err := w.comm.bound(ctx, func(ctx context.Context) error { return collective.Barrier(ctx, w.comm.g) }); err != nil {
				return fmt.Errorf("checkpoint after epoch %d: %w", epoch, err)
			}
			lastCkpt = time.Now()
		}
	}
	if rank == 0 {
		st := g.Stats()
		fmt.Fprintf(w.out, "worker 0 sent %d bytes in %d messages through its collectives\n", st.BytesSent, st.MsgsSent)
		if w.job.Output != "" {
			return writeModel(ctx, w.res, w.job.Output, w.tr.Model)
		}
	}
	return nil
}

// parseInterval reads SPINDLE_CHECKPOINT_INTERVAL: a number of epochs or
// a duration; empty means every epoch.
func parseInterval(s string) (every int, after time.Duration, err error) {
	if s == "" {
		return 1, 0, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 {
		return n, 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, 0, fmt.Errorf("%q: want a number of epochs or a duration", s)
	}
	return 0, d, nil
}

// groupComm is dense.Comm over a collective group, each call bounded by
// timeout.
type groupComm struct {
	g       *collective.Group
	timeout time.Duration
}

func (c *groupComm) Rank() int                    { return c.g.Rank() }
func (c *groupComm) Size() int                    { return c.g.Size() }
func (c *groupComm) Shard(n, rank int) (int, int) { return c.g.Shard(n, rank) }

func (c *groupComm) bound(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return f(ctx)
}

func (c *groupComm) AllReduceSum(ctx context.Context, buf []int64) error {
	return c.bound(ctx, func(ctx context.Context) error { return collective.AllReduce(ctx, c.g, buf, collective.Sum) })
}

func (c *groupComm) ReduceScatterSum(ctx context.Context, buf []int64) error {
	return c.bound(ctx, func(ctx context.Context) error { return collective.ReduceScatter(ctx, c.g, buf, collective.Sum) })
}

func (c *groupComm) AllGather(ctx context.Context, buf []float64) error {
	return c.bound(ctx, func(ctx context.Context) error { return collective.AllGather(ctx, c.g, buf) })
}

func (c *groupComm) ReduceSum(ctx context.Context, buf []float64) error {
	return c.bound(ctx, func(ctx context.Context) error { return collective.Reduce(ctx, c.g, buf, collective.Sum, 0) })
}

func (c *groupComm) Broadcast(ctx context.Context, buf []int64) error {
	return c.bound(ctx, func(ctx context.Context) error { return collective.Broadcast(ctx, c.g, buf, 0) })
}

// The files of a checkpoint besides the parameter table's.
const (
	stateFile    = "dense.json"
	maxStateFile = 1 << 20
	tableName    = "w"
)

// stateDoc is stateFile: what the parameter table does not say.
type stateDoc struct {
	Format   string `json:"format"`
	Mode     string `json:"mode"`
	Steps    int    `json:"steps"`
	Features int    `json:"features"`
	Classes  int    `json:"classes"`
}

const stateFormat = "spindle-dense/1"

// checkpoint writes checkpoint n: worker 0 gathers the optimizer state
// and writes table w (each row: a feature's weights for every class, and
// as its state Adam's first moments, then its second moments) and
// stateFile, and has the tracker commit them.
func (w *worker) checkpoint(ctx context.Context, n int) error {
	m, v, err := w.tr.GatherState(ctx)
	if err != nil || w.comm.Rank() != 0 {
		return err
	}
	store := ckpt.NewTableStore(w.res, w.job.CheckpointDir)
	mod := w.tr.Model
	tf, err := store.WriteTable(ctx, n, 0, &paramTable{m: mod, mom: m, vel: v})
	if err != nil {
		return err
	}
	doc, _ := json.Marshal(stateDoc{Format: stateFormat, Mode: w.f.cfg.Mode, Steps: w.tr.Steps, Features: mod.D, Classes: mod.K})
	sf, err := store.WriteFile(ctx, n, stateFile, doc)
	if err != nil {
		return err
	}
	return w.tc.CommitCheckpoint(ctx, tracker.CheckpointInfo{N: n, Epoch: n, NextEpoch: n, Files: []tracker.CheckpointFile{
		{Name: tf.Name, Bytes: tf.Bytes, SHA256: tf.SHA256}, {Name: sf.Name, Bytes: sf.Bytes, SHA256: sf.SHA256},
	}})
}

// restore loads the checkpoint the job resumes from; every worker reads
// it and keeps its part of the optimizer state.
func (w *worker) restore(ctx context.Context) error {
	store := ckpt.NewTableStore(w.res, w.job.CheckpointDir)
	data, err := store.ReadFile(ctx, w.job.ResumeFrom, stateFile, maxStateFile)
	if err != nil {
		return err
	}
	var doc stateDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("%s: %w", stateFile, err)
	}
	mod := w.tr.Model
	if doc.Format != stateFormat || doc.Features != mod.D || doc.Classes != mod.K {
		return fmt.Errorf("%s: format %q, %d features and %d classes; this job has %d features and %d classes",
			stateFile, doc.Format, doc.Features, doc.Classes, mod.D, mod.K)
	}
	n := len(mod.W)
	params, m, v := make([]float64, n), make([]float64, n), make([]float64, n)
	seen := make([]bool, mod.D+1)
	k := mod.K
	width, sw, err := store.ReadTable(ctx, w.job.ResumeFrom, 0, tableName, func(key uint64, vals, state []float64) error {
		if key > uint64(mod.D) || len(vals) != k || len(state) != 2*k {
			return fmt.Errorf("row %d of %d values and %d state values; want rows 0..%d of %d and %d", key, len(vals), len(state), mod.D, k, 2*k)
		}
		j := int(key)
		seen[j] = true
		copy(params[j*k:(j+1)*k], vals)
		copy(m[j*k:(j+1)*k], state[:k])
		copy(v[j*k:(j+1)*k], state[k:])
		return nil
	})
	if err != nil {
		return err
	}
	if width != k || sw != 2 {
		return fmt.Errorf("table %s of width %d and state width %d; want %d and 2", tableName, width, sw, k)
	}
	for j, ok := range seen {
		if !ok {
			return fmt.Errorf("table %s lacks row %d", tableName, j)
		}
	}
	return w.tr.SetState(doc.Steps, params, m, v)
}

// writeModel writes the model as table w, part 0, all or nothing; the
// launcher commits it once every task has exited 0.
func writeModel(ctx context.Context, res *dfs.Resolver, output string, m dense.Model) error {
	tw, err := model.NewTableWriter(res, output, model.PartText)
	if err != nil {
		return err
	}
	return tw.WriteModel(ctx, 0, []model.Table{&paramTable{m: m}})
}

// paramTable is the parameters as a table (ckpt.Table, model.Table): row
// j of width K, for j in 0..D; with moments, Adam's state of each row:
// its K first moments, then its K second moments.
type paramTable struct {
	m        dense.Model
	mom, vel []float64
}

func (t *paramTable) Name() string { return tableName }
func (t *paramTable) Elem() string { return "float64" }
func (t *paramTable) Width() int   { return t.m.K }
func (t *paramTable) StateWidth() int {
	if t.mom == nil {
		return 0
	}
	return 2
}
func (t *paramTable) Len() int { return t.m.D + 1 }
func (t *paramTable) Range(yield func(key uint64, vals, state []float64) bool) {
	k := t.m.K
	var state []float64
	if t.mom != nil {
		state = make([]float64, 2*k)
	}
	for j := 0; j <= t.m.D; j++ {
		if state != nil {
			copy(state[:k], t.mom[j*k:(j+1)*k])
			copy(state[k:], t.vel[j*k:(j+1)*k])
		}
		if !yield(uint64(j), t.m.W[j*k:(j+1)*k], state) {
			return
		}
	}
}

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
	"github.com/spindle-ps/spindle/examples/fm/fm"
	"github.com/spindle-ps/spindle/examples/internal/consistency"
	"github.com/spindle-ps/spindle/examples/internal/subcmd"
	"github.com/spindle-ps/spindle/examples/internal/workerloop"
	"github.com/spindle-ps/spindle/examples/lr/lr"
	"github.com/spindle-ps/spindle/feed"
	"github.com/spindle-ps/spindle/io/dfs"
	"github.com/spindle-ps/spindle/io/model"
	"github.com/spindle-ps/spindle/io/records"
	"github.com/spindle-ps/spindle/psnode"
	"github.com/spindle-ps/spindle/psnode/store"
	"github.com/spindle-ps/spindle/psnode/transport"
	"github.com/spindle-ps/spindle/tracker"
)

// Default updater parameters. The weights use ps-lr's FTRL-proximal
// parameters; the embeddings start small (fm.DefaultInitScale) and learn
// slowly under L2, so that on data without interactions the machine does
// as well as logistic regression.
const (
	defaultVLR = 0.001
	defaultVL2 = 1.0
	defaultWLR = 0.05
)

// trainFlags are ps-fm's training options; every process of a job gets
// the same ones.
type trainFlags struct {
	epochs int
	model  fm.Config

	wUpdater                   string
	alpha, beta, wL1, wL2, wLR float64
	vUpdater                   string
	vLR, vL2                   float64

	consistency.Flags // --async, --staleness, --prefetch, --compress, --delta-keys, --key-cache, --significance
	workerloop.Data   // --batch, --format, --max-bad-records, --cache-mb, --die-after, --hang-after
	requestTimeout    time.Duration
	partitioner       string
	test              string
	modelFormat       string

	// requestTimeoutGiven: --request-timeout was given
	// (workerloop.RequestTimeout).
	requestTimeoutGiven bool
}

func parseTrainFlags(args []string) (trainFlags, error) {
	f := trainFlags{model: fm.DefaultConfig()}
	def := lr.DefaultFTRLParams()
	fl := flag.NewFlagSet("ps-fm", flag.ContinueOnError)
	subcmd.Usage(fl, trainUsage)
	fl.IntVar(&f.epochs, "epochs", 3, "passes over the input")
	f.Data.Register(fl)
	fl.IntVar(&f.model.Dim, "dim", fm.DefaultDim, "embedding dimension: values per feature in table v")
	fl.BoolVar(&f.model.Bias, "bias", true, "learn a global bias (the weight of key 0)")
	fl.Float64Var(&f.model.InitScale, "init-scale", fm.DefaultInitScale, "initial embedding values are uniform in [-init-scale, init-scale), seeded by the key")
	fl.StringVar(&f.wUpdater, "w-updater", "ftrl", "updater of the weights (table w): ftrl, adagrad or sgd")
	fl.Float64Var(&f.alpha, "w-alpha", def["alpha"], "FTRL alpha of the weights")
	fl.Float64Var(&f.beta, "w-beta", def["beta"], "FTRL beta of the weights")
	fl.Float64Var(&f.wL1, "w-l1", def["l1"], "FTRL L1 regularisation of the weights")
	fl.Float64Var(&f.wL2, "w-l2", def["l2"], "L2 regularisation of the weights")
	fl.Float64Var(&f.wLR, "w-lr", defaultWLR, "AdaGrad and SGD learning rate of the weights")
	fl.StringVar(&f.vUpdater, "v-updater", "adagrad", "updater of the embeddings (table v): adagrad or sgd")
	fl.Float64Var(&f.vLR, "v-lr", defaultVLR, "learning rate of the embeddings")
	fl.Float64Var(&f.vL2, "v-l2", defaultVL2, "L2 regularisation of the embeddings")
	f.Flags.Register(fl)
	fl.DurationVar(&f.requestTimeout, "request-timeout", workerloop.DefaultRequestTimeout, "longest wait for one push or pull (in synchronous mode, also for the slowest worker's step); the worker fails past it. Not given: at least a minute more than the job's stall timeout (ps-submit --stall-timeout), so that a hung worker is started again first")
	fl.StringVar(&f.partitioner, "partitioner", "hash", "how feature ids are spread over servers: hash, consistent (hashing that moves the fewest ids when servers come or go), or range over [0, DMLC_MAX_DIMENSION)")
	fl.StringVar(&f.test, "test", "", "held-out file in --format (local or hdfs://) to report AUC on after each epoch")
	fl.StringVar(&f.modelFormat, "model-format", model.PartText, "format of the written model's parts: "+model.PartText+" or "+model.PartBinary)
	if err := subcmd.Parse(fl, args); err != nil {
		return f, err
	}
	fl.Visit(func(fg *flag.Flag) { f.requestTimeoutGiven = f.requestTimeoutGiven || fg.Name == "request-timeout" })
	var errs []error
	if f.epochs < 1 {
		errs = append(errs, fmt.Errorf("--epochs %d: need at least 1", f.epochs))
	}
	errs = append(errs, f.Data.Check()...)
	if f.model.Dim < 1 || f.model.Dim > min(fm.MaxDim, store.MaxDim) {
		errs = append(errs, fmt.Errorf("--dim %d: want 1 to %d", f.model.Dim, min(fm.MaxDim, store.MaxDim)))
	} else if err := f.model.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--init-scale %v: %w", f.model.InitScale, err))
	}
	if f.requestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--request-timeout %v: must be positive", f.requestTimeout))
	}
	if err := f.Flags.Check(fl); err != nil {
		errs = append(errs, err)
	}
	if _, err := f.wUpdaterOf(); err != nil {
		errs = append(errs, err)
	}
	if _, err := f.vUpdaterOf(); err != nil {
		errs = append(errs, err)
	}
	if f.partitioner != "hash" && f.partitioner != "consistent" && f.partitioner != "range" {
		errs = append(errs, fmt.Errorf("--partitioner %q: want hash, consistent or range", f.partitioner))
	}
	if f.modelFormat != model.PartText && f.modelFormat != model.PartBinary {
		errs = append(errs, fmt.Errorf("--model-format %q: want %s or %s", f.modelFormat, model.PartText, model.PartBinary))
	}
	return f, errors.Join(errs...)
}

// wUpdaterOf builds the weights' updater from the flags.
func (f trainFlags) wUpdaterOf() (store.Updater[float32], error) {
	var (
		u   store.Updater[float32]
		err error
	)
	switch f.wUpdater {
	case "ftrl":
		u, err = store.NewUpdater[float32]("ftrl", map[string]float64{"alpha": f.alpha, "beta": f.beta, "l1": f.wL1, "l2": f.wL2})
	case "adagrad", "sgd":
		u, err = store.NewUpdater[float32](f.wUpdater, map[string]float64{"lr": f.wLR, "l2": f.wL2})
	default:
		return nil, fmt.Errorf("--w-updater %q: want ftrl, adagrad or sgd", f.wUpdater)
	}
	if err != nil {
		return nil, fmt.Errorf("--w-updater %s: %w", f.wUpdater, err)
	}
	return u, nil
}

// vUpdaterOf builds the embeddings' updater from the flags. FTRL is not
// offered: it computes each value from its state alone, which would
// replace the initial embeddings by zeros, where the interactions have no
// gradient.
func (f trainFlags) vUpdaterOf() (store.Updater[float32], error) {
	if f.vUpdater != "adagrad" && f.vUpdater != "sgd" {
		return nil, fmt.Errorf("--v-updater %q: want adagrad or sgd", f.vUpdater)
	}
	u, err := store.NewUpdater[float32](f.vUpdater, map[string]float64{"lr": f.vLR, "l2": f.vL2})
	if err != nil {
		return nil, fmt.Errorf("--v-updater %s: %w", f.vUpdater, err)
	}
	return u, nil
}

// newResolver reaches local files and HDFS, configured the Hadoop way.
func newResolver(lookup conf.Lookup) (*dfs.Resolver, error) { return dfs.DefaultResolver(lookup) }

// tables declares the job's two tables on the node's table set.
func (f trainFlags) tables(ts *psnode.Tables) (w, v *psnode.Table[float32], err error) {
	wu, err := f.wUpdaterOf()
	if err != nil {
		return nil, nil, err
	}
	vu, err := f.vUpdaterOf()
	if err != nil {
		return nil, nil, err
	}
	w, err = psnode.NewTable(ts, consistency.Table(f.Flags, psnode.TableSpec[float32]{Name: "w", Width: 1, Updater: wu, Partitioner: f.partitioner}))
	if err != nil {
		return nil, nil, err
	}
	// Keys never pushed read as their initial embedding, on every server
	// alike; the first push updates it.
	scale := f.model.InitScale
	v, err = psnode.NewTable(ts, consistency.Table(f.Flags, psnode.TableSpec[float32]{
		Name: "v", Width: f.model.Dim, Updater: vu, Partitioner: f.partitioner,
		Init: func(key uint64, vals []float32) { fm.Init(key, vals, scale) },
	}))
	return w, v, err
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
	n, cfg, tc := task.Node, task.Config, task.Tracker
	// Both tables are checkpointed, restored and written by psnode.
	// Workers take their shards from the tracker; servers tell it that
	// their tables keep replicas, and when they restored them.
	if n.Role() == transport.RoleWorker && tc == nil {
		return errors.New("no tracker (SPINDLE_TRACKER_ADDR): run ps-fm through ps-submit")
	}
	ts, err := task.Tables(f.modelFormat)
	if err != nil {
		return err
	}
	wt, vt, err := f.tables(ts)
	if err != nil {
		return err
	}
	if n.Role() == transport.RoleWorker {
		f.requestTimeout = workerloop.RequestTimeout(f.requestTimeoutGiven, f.requestTimeout, cfg.PS.StallTimeout)
		w := &worker{n: n, f: f, ts: ts, wt: wt, vt: vt, tc: tc, res: task.Files, out: stdout, log: log, attempt: cfg.PS.NumAttempt, joining: cfg.PS.Joining, job: cfg.Job}
		if err := w.train(ctx); err != nil {
			return err
		}
	}
	// Training done: servers write their parts of both tables.
	if err := ts.Finish(ctx); err != nil {
		return err
	}
	return n.Finalize(ctx)
}

// worker trains: reads shards in mini-batches, pulls weights and
// embeddings, pushes their gradients; after each epoch reports its loss,
// and worker 0 the test AUC.
type worker struct {
	n       *psnode.Node
	f       trainFlags
	ts      *psnode.Tables
	wt, vt  *psnode.Table[float32]
	tc      *tracker.Client
	res     *dfs.Resolver
	out     io.Writer
	log     *logrus.Entry
	joining bool // started for a scale-out (conf.PS.Joining)
	attempt int
	job     conf.Job

	w, v, gw, gv []float32 // the test set's weights; every batch's gradients
	pipe         *feed.Pipeline[slot]
	counts       workerloop.Counts
	test         []lr.Example
	testKeys     []uint64
}

func (w *worker) train(ctx context.Context) error {
	if w.f.test != "" && w.n.Rank() == 0 {
		if err := w.loadTest(ctx); err != nil {
			return err
		}
	}
	opts, err := w.f.Data.Feed(w.n, w.tc, w.res, w.attempt, w.job.TaskMemoryMB, w.f.Free())
	if err != nil {
		return err
	}
	w.pipe = &feed.Pipeline[slot]{Depth: w.f.Depth(), Start: w.start, Finish: w.finish}
	return workerloop.Loop[slot]{
		Tables: w.ts, Tracker: w.tc, Pipe: w.pipe, Log: w.log,
		Feed:   opts,
		Epochs: w.f.epochs, ResumeEpoch: w.job.ResumeEpoch, Joining: w.joining, RequestTimeout: w.f.requestTimeout,
		Counts:   &w.counts,
		EndEpoch: w.endEpoch,
		Evaluate: w.evaluate, Out: w.out,
	}.Run(ctx)
}

// endEpoch waits, at most --request-timeout, until every worker is
// done with the epoch.
func (w *worker) endEpoch(ctx context.Context, epoch int) error {
	ctx, cancel := context.WithTimeout(ctx, w.f.requestTimeout)
	defer cancel()
	return w.ts.EndEpoch(ctx, epoch)
}

// both sends a request to each table and waits for the two, at most
// --request-timeout.
func (w *worker) both(ctx context.Context, req func(t *psnode.Table[float32]) (int32, error)) error {
	ctx, cancel := context.WithTimeout(ctx, w.f.requestTimeout)
	defer cancel()
	tw, err := req(w.wt)
	if err != nil {
		return fmt.Errorf("table w: %w", err)
	}
	tv, err := req(w.vt)
	if err != nil {
		_ = w.wt.Wait(ctx, tw)
		return fmt.Errorf("table v: %w", err)
	}
	errW := w.wt.Wait(ctx, tw)
	errV := w.vt.Wait(ctx, tv)
	if errW != nil {
		return fmt.Errorf("table w: %w", errW)
	}
	if errV != nil {
		return fmt.Errorf("table v: %w", errV)
	}
	return nil
}

// pull fetches the weights of keys and the embeddings of their features
// into w.w and w.v.
func (w *worker) pull(ctx context.Context, keys []uint64) error {
	fk := fm.FeatureKeys(keys)
	return w.both(ctx, func(t *psnode.Table[float32]) (int32, error) {
		if t == w.wt {
			return t.Pull(ctx, keys, &w.w)
		}
		return t.Pull(ctx, fk, &w.v)
	})
}

// slot is ps-fm's state of one batch in the pipeline.
type slot struct {
	ex           []lr.Example
	keys         []uint64
	w, v         []float32
	pullW, pullV int32
}

// start works out a batch's keys and sends the pulls of their weights and
// embeddings.
func (w *worker) start(ctx context.Context, s *feed.Slot[slot]) error {
	m := &s.Model
	m.ex = toExamples(m.ex, s.Batch.Examples)
	var err error
	if m.keys, err = lr.BatchKeys(m.ex, m.keys); err != nil {
		return err
	}
	e, st := s.Batch.Epoch, s.Batch.Step
	if m.pullW, err = w.wt.PullBatch(ctx, e, st, m.keys, &m.w); err != nil {
		return fmt.Errorf("pull: table w: %w", err)
	}
	if m.pullV, err = w.vt.PullBatch(ctx, e, st, fm.FeatureKeys(m.keys), &m.v); err != nil {
		return fmt.Errorf("pull: table v: %w", err)
	}
	return nil
}

// finish waits for a batch's weights and embeddings, computes their
// gradients and sends the pushes.
func (w *worker) finish(ctx context.Context, s *feed.Slot[slot]) ([]feed.Pending, error) {
	m := &s.Model
	if err := w.both(ctx, func(t *psnode.Table[float32]) (int32, error) {
		if t == w.wt {
			return m.pullW, nil
		}
		return m.pullV, nil
	}); err != nil {
		return nil, fmt.Errorf("pull: %w", err)
	}
	keys := m.keys
	w.gw = resize(w.gw, len(m.w))
	w.gv = resize(w.gv, len(m.v))
	loss, err := w.f.model.Gradient(m.ex, keys, m.w, m.v, w.gw, w.gv)
	if err != nil {
		return nil, err
	}
	w.counts.LossSum += loss
	w.counts.Examples += int64(len(m.ex))
	wk := w.f.model.WeightKeys(keys)
	e, st := s.Batch.Epoch, s.Batch.Step
	var pending []feed.Pending
	for _, p := range []struct {
		t    *psnode.Table[float32]
		k    []uint64
		g    []float32
		name string
	}{{w.wt, wk, w.gw[len(keys)-len(wk):], "w"}, {w.vt, fm.FeatureKeys(keys), w.gv, "v"}} {
		ts, err := p.t.PushBatch(ctx, e, st, p.k, p.g)
		if err != nil {
			return pending, fmt.Errorf("push: table %s: %w", p.name, err)
		}
		pending = append(pending, func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, w.f.requestTimeout)
			defer cancel()
			if err := p.t.Wait(ctx, ts); err != nil {
				return fmt.Errorf("push: table %s: %w", p.name, err)
			}
			return nil
		})
	}
	return pending, nil
}

func resize(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// toExamples converts records into dst's storage.
func toExamples(dst []lr.Example, recs []records.Example) []lr.Example {
	dst = slices.Grow(dst[:0], len(recs))[:len(recs)]
	for i := range recs {
		dst[i] = lr.Example(recs[i])
	}
	return dst
}

// loadTest reads the held-out file and the keys it needs.
func (w *worker) loadTest(ctx context.Context) error {
	var err error
	if w.test, err = readExamples(ctx, w.res, w.f.test, w.f.Data.Records()); err != nil {
		return fmt.Errorf("--test: %w", err)
	}
	w.testKeys, err = lr.BatchKeys(w.test, nil)
	return err
}

// readExamples reads every record of the files uri names into memory.
func readExamples(ctx context.Context, res *dfs.Resolver, uri string, opts records.Options) ([]lr.Example, error) {
	recs, err := feed.ReadAll(ctx, res, uri, opts)
	if err != nil {
		return nil, err
	}
	return toExamples(nil, recs), nil
}

// evaluate scores the model on the test set, when this worker holds it.
func (w *worker) evaluate(ctx context.Context) (auc, logloss float64, ok bool, err error) {
	if len(w.test) == 0 {
		return 0, 0, false, nil
	}
	if err := w.pull(ctx, w.testKeys); err != nil {
		return 0, 0, false, fmt.Errorf("pull the test keys: %w", err)
	}
	fk := fm.FeatureKeys(w.testKeys)
	mod := fm.Model{Config: w.f.model, WKeys: w.testKeys, W: w.w, VKeys: fk, V: w.v}
	auc, logloss, err = mod.Evaluate(w.test)
	return auc, logloss, err == nil, err
}

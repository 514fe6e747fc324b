package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/spindle-ps/spindle/conf"
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

// trainFlags are ps-lr's training options; every process of a job gets
// the same ones.
type trainFlags struct {
	epochs         int
	updater        string
	alpha, beta    float64
	l1, l2         float64
	lr             float64
	eps            float64
	beta1, beta2   float64
	set            map[string]bool // flags given on the command line
	modelFormat    string
	kkt            float64
	requestTimeout time.Duration
	partitioner    string
	test           string

	consistency.Flags // --async, --staleness, --prefetch, --compress, --delta-keys, --key-cache, --significance
	workerloop.Data   // --batch, --format, --max-bad-records, --cache-mb, --die-after, --hang-after
}

func parseTrainFlags(args []string) (trainFlags, error) {
	var f trainFlags
	def := lr.DefaultFTRLParams()
	adam := store.DefaultAdam[float32]()
	fl := flag.NewFlagSet("ps-lr", flag.ContinueOnError)
	subcmd.Usage(fl, trainUsage)
	fl.IntVar(&f.epochs, "epochs", 3, "passes over the input")
	f.Data.Register(fl)
	fl.StringVar(&f.updater, "updater", "ftrl", "server-side updater: "+strings.Join(store.UpdaterNames(), ", "))
	fl.Float64Var(&f.alpha, "alpha", def["alpha"], "FTRL alpha")
	fl.Float64Var(&f.beta, "beta", def["beta"], "FTRL beta")
	fl.Float64Var(&f.l1, "l1", def["l1"], "FTRL L1 regularisation")
	fl.Float64Var(&f.l2, "l2", def["l2"], "FTRL, SGD and AdaGrad L2 regularisation")
	fl.Float64Var(&f.lr, "lr", 0.05, fmt.Sprintf("AdaGrad, SGD and Adam learning rate (Adam: %g unless given)", adam.LR))
	fl.Float64Var(&f.eps, "eps", adam.Eps, "AdaGrad and Adam epsilon (AdaGrad: 1e-10 unless given)")
	fl.Float64Var(&f.beta1, "beta1", adam.Beta1, "Adam first-moment decay")
	fl.Float64Var(&f.beta2, "beta2", adam.Beta2, "Adam second-moment decay")
	f.Flags.Register(fl)
	fl.DurationVar(&f.requestTimeout, "request-timeout", workerloop.DefaultRequestTimeout, "longest wait for one push or pull (in synchronous mode, also for the slowest worker's step); the worker fails past it. Not given: at least a minute more than the job's stall timeout (ps-submit --stall-timeout), so that a hung worker is started again first")
	fl.StringVar(&f.partitioner, "partitioner", "hash", "how feature ids are spread over servers: hash, consistent (hashing that moves the fewest ids when servers come or go), or range over [0, DMLC_MAX_DIMENSION)")
	fl.StringVar(&f.test, "test", "", "held-out file in --format (local or hdfs://) to report AUC on after each epoch")
	fl.Float64Var(&f.kkt, "kkt", 0, "with --async or --staleness and FTRL with --l1 > 0: hold back the gradient of a key whose weight is zero until it adds up to this fraction of --l1 (the KKT filter; 0: off, 0.1 a good start)")
	fl.StringVar(&f.modelFormat, "model-format", model.PartText, "format of the model's parts: text (key<TAB>weight lines, for hdfs dfs -text) or binary (faster to load)")
	if err := subcmd.Parse(fl, args); err != nil {
		return f, err
	}
	f.set = map[string]bool{}
	fl.Visit(func(fg *flag.Flag) { f.set[fg.Name] = true })
	var errs []error
	if f.epochs < 1 {
		errs = append(errs, fmt.Errorf("--epochs %d: need at least 1", f.epochs))
	}
	errs = append(errs, f.Data.Check()...)
	if err := f.Flags.Check(fl); err != nil {
		errs = append(errs, err)
	}
	switch {
	case f.kkt < 0 || math.IsNaN(f.kkt) || math.IsInf(f.kkt, 0):
		errs = append(errs, fmt.Errorf("--kkt %v: want a finite number >= 0", f.kkt))
	case f.kkt > 0 && !f.Free():
		errs = append(errs, fmt.Errorf("--kkt %v: %w", f.kkt, consistency.ErrNeedsFreeMode))
	case f.kkt > 0 && (f.updater != store.NameFTRL || f.l1 <= 0):
		errs = append(errs, fmt.Errorf("--kkt %v: needs --updater ftrl with --l1 > 0 (have --updater %s, --l1 %v)", f.kkt, f.updater, f.l1))
	}
	if f.requestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--request-timeout %v: must be positive", f.requestTimeout))
	}
	if _, err := f.newUpdater(); err != nil {
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

// kktThreshold is the KKT filter's threshold: --kkt times the L1
// strength (0, off, without --kkt).
func (f trainFlags) kktThreshold() float64 { return f.kkt * f.l1 }

// updaterFlags are the flags each updater takes, by the parameter names
// store.NewUpdater knows; flags marked with a default are passed even
// when not given (ps-lr's own defaults), the others only when given (the
// store's defaults otherwise).
var updaterFlags = map[string]map[string]bool{
	store.NameSum:     {},
	store.NameSGD:     {"lr": true, "l2": true},
	store.NameAdaGrad: {"lr": true, "l2": true, "eps": false},
	store.NameFTRL:    {"alpha": true, "beta": true, "l1": true, "l2": true},
	store.NameAdam:    {"lr": false, "beta1": false, "beta2": false, "eps": false},
}

// newUpdater builds the --updater from its flags; a flag given for an
// updater that does not take it is an error naming both.
func (f trainFlags) newUpdater() (store.Updater[float32], error) {
	takes, ok := updaterFlags[f.updater]
	if !ok {
		return nil, fmt.Errorf("--updater %q: want one of %s", f.updater, strings.Join(store.UpdaterNames(), ", "))
	}
	vals := map[string]float64{"alpha": f.alpha, "beta": f.beta, "l1": f.l1, "l2": f.l2, "lr": f.lr, "eps": f.eps, "beta1": f.beta1, "beta2": f.beta2}
	params := map[string]float64{}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(vals)) {
		byDefault, takesIt := takes[name]
		switch {
		case takesIt && (byDefault || f.set[name]):
			params[name] = vals[name]
		case !takesIt && f.set[name]:
			errs = append(errs, fmt.Errorf("--%s: the %s updater does not take it", name, f.updater))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	u, err := store.NewUpdater[float32](f.updater, params)
	if err != nil {
		return nil, fmt.Errorf("--updater %s: %w", f.updater, err)
	}
	return u, nil
}

// newResolver reaches local files and HDFS, configured the Hadoop way.
func newResolver(lookup conf.Lookup) (*dfs.Resolver, error) { return dfs.DefaultResolver(lookup) }

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
	// The weights: one table, checkpointed, restored and written by psnode.
	tables, err := task.Tables(f.modelFormat)
	if err != nil {
		return err
	}
	upd, err := f.newUpdater()
	if err != nil {
		return err
	}
	weights, err := psnode.NewTable(tables, consistency.Table(f.Flags, psnode.TableSpec[float32]{
		Name: "w", Width: 1, Updater: upd, Partitioner: f.partitioner, KKT: f.kktThreshold(),
	}))
	if err != nil {
		return err
	}
	if n.Role() == transport.RoleWorker {
		if tc == nil {
			return errors.New("no tracker (SPINDLE_TRACKER_ADDR): run ps-lr through ps-submit")
		}
		f.requestTimeout = workerloop.RequestTimeout(f.set["request-timeout"], f.requestTimeout, cfg.PS.StallTimeout)
		w := &worker{n: n, f: f, tc: tc, res: task.Files, out: stdout, log: log, attempt: cfg.PS.NumAttempt, joining: cfg.PS.Joining, job: cfg.Job, tables: tables, t: weights}
		if err := w.train(ctx); err != nil {
			return err
		}
	}
	// Training done: servers write the model.
	if err := tables.Finish(ctx); err != nil {
		return err
	}
	return n.Finalize(ctx)
}

// worker trains: reads shards in mini-batches, pulls weights, pushes
// gradients; after each epoch reports its loss, and worker 0 the test AUC.
type worker struct {
	n       *psnode.Node
	f       trainFlags
	tc      *tracker.Client
	res     *dfs.Resolver
	out     io.Writer
	log     *logrus.Entry
	joining bool // started for a scale-out (conf.PS.Joining)
	attempt int
	job     conf.Job
	tables  *psnode.Tables
	t       *psnode.Table[float32]

	counts   workerloop.Counts
	test     []lr.Example
	testKeys []uint64

	pipe *feed.Pipeline[slot] // the mini-batches in flight
	grad []float32
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
	w.pipe = w.newPipeline()
	return workerloop.Loop[slot]{
		Tables: w.tables, Tracker: w.tc, Pipe: w.pipe, Log: w.log,
		Feed:   opts,
		Epochs: w.f.epochs, ResumeEpoch: w.job.ResumeEpoch, Joining: w.joining, RequestTimeout: w.f.requestTimeout,
		Counts: &w.counts,
		EndEpoch: func(ctx context.Context, epoch int) error {
			// Returns when every worker is done with the epoch.
			return w.wait(ctx, func() (int32, error) { return w.t.EndEpoch(ctx, epoch) })
		},
		Evaluate: w.evaluate, Out: w.out,
	}.Run(ctx)
}

// wait sends a request and waits for it, at most --request-timeout.
func (w *worker) wait(ctx context.Context, req func() (int32, error)) error {
	ts, err := req()
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, w.f.requestTimeout)
		defer cancel()
		err = w.t.Wait(ctx, ts)
	}
	return err
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
	recs, err := feed.ReadAll(ctx, w.res, w.f.test, w.f.Data.Records())
	if err != nil {
		return fmt.Errorf("--test: %w", err)
	}
	w.test = toExamples(nil, recs)
	w.testKeys, err = lr.BatchKeys(w.test, nil)
	return err
}

// evaluate scores the model on the test set, when this worker holds it.
func (w *worker) evaluate(ctx context.Context) (auc, logloss float64, ok bool, err error) {
	if len(w.test) == 0 {
		return 0, 0, false, nil
	}
	var weights []float32
	if err := w.wait(ctx, func() (int32, error) { return w.t.Pull(ctx, w.testKeys, &weights) }); err != nil {
		return 0, 0, false, fmt.Errorf("pull the test keys: %w", err)
	}
	auc, logloss, err = lr.Model{Keys: w.testKeys, W: weights}.Evaluate(w.test)
	return auc, logloss, err == nil, err
}

// readExamples reads every record of the files uri names into memory.
func readExamples(ctx context.Context, res *dfs.Resolver, uri string, opts records.Options) ([]lr.Example, error) {
	recs, err := feed.ReadAll(ctx, res, uri, opts)
	if err != nil {
		return nil, err
	}
	return toExamples(nil, recs), nil
}

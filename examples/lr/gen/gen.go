package gen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"slices"
	"strconv"

	"github.com/spindle-ps/spindle/examples/lr/lr"
)

// ErrInvalidConfig is wrapped by the errors of Config.Validate.
var ErrInvalidConfig = errors.New("gen: invalid configuration")

// Config describes a synthetic data set: a true logistic model, fixed by
// ModelSeed and the other fields except RowSeed and Rows, and rows drawn
// from it, fixed in addition by RowSeed and Rows. Start from Default.
//
// The true model has a nonzero weight on a Density fraction of the
// Informative most frequent ids, normal with standard deviation
// WeightStd, and an intercept calibrated so that about PositiveRate of the
// rows are positive. The ids above Informative, the long tail of rare ids,
// carry no signal: a trainer sees hundreds of thousands of distinct keys
// and must learn to leave the noise alone (FTRL's L1 term does), while the
// signal sits in ids frequent enough to be learnt from a few hundred
// thousand rows. With the defaults, the true model's AUC is about 0.84 and
// FTRL reaches within about 0.01 of it in two passes over 200,000 rows.
type Config struct {
	// ModelSeed seeds the true model. Configurations that differ only in
	// RowSeed and Rows share the true model. (The row fields enter the
	// model through the calibration of its intercept.)
	ModelSeed int64
	// RowSeed seeds the rows. A train and a test set use the same
	// ModelSeed and different RowSeeds (see TestSet).
	RowSeed int64
	// Rows is the number of rows, >= 0.
	Rows int

	// Features is the size of the feature id space: ids are 1..Features
	// (key 0 is the intercept's, lr.InterceptKey). Default 1_000_000; at
	// least twice MaxPerRow.
	Features int
	// MinPerRow and MaxPerRow bound the number of distinct features of a
	// row, drawn uniformly in [MinPerRow, MaxPerRow]. Defaults 8 and 40;
	// 1 <= MinPerRow <= MaxPerRow <= MaxPerRowLimit.
	MinPerRow, MaxPerRow int
	// ZipfS is the exponent of the power law of feature ids: id i is
	// drawn with probability proportional to i^-ZipfS, so that small ids
	// are frequent and large ones rare, like the values of CTR features.
	// Must be > 1; default 1.1.
	ZipfS float64

	// Informative is the number of ids, the most frequent ones
	// 1..Informative, that may have a nonzero true weight; 0 means all
	// Features. Default 2000.
	Informative int
	// Density is the fraction of the informative ids whose true weight is
	// not 0, in (0, 1]; default 0.5.
	Density float64
	// WeightStd is the standard deviation of the normal distribution of
	// the nonzero true weights, > 0; default 0.7.
	WeightStd float64
	// PositiveRate is the expected fraction of rows with label 1, in
	// (0, 1); default 0.2. The true intercept is set to give it, by
	// bisection over 10,000 rows drawn from a seed derived from
	// ModelSeed; the rate of a large data set is then within about 0.01
	// of it.
	PositiveRate float64
}

// MaxPerRowLimit is the largest MaxPerRow that Validate accepts.
const MaxPerRowLimit = 1 << 16

// Default returns the default configuration, with seeds 1 and 1 and
// 200,000 rows.
func Default() Config {
	return Config{
		ModelSeed:    1,
		RowSeed:      1,
		Rows:         200_000,
		Features:     1_000_000,
		MinPerRow:    8,
		MaxPerRow:    40,
		ZipfS:        1.1,
		Informative:  2000,
		Density:      0.5,
		WeightStd:    0.7,
		PositiveRate: 0.2,
	}
}

// Validate checks every field and reports all the problems it finds.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	if c.Rows < 0 {
		bad("rows = %d, want >= 0", c.Rows)
	}
	if c.MinPerRow < 1 || c.MinPerRow > c.MaxPerRow || c.MaxPerRow > MaxPerRowLimit {
		bad("features per row in [%d, %d], want 1 <= min <= max <= %d", c.MinPerRow, c.MaxPerRow, MaxPerRowLimit)
	}
	if c.Features < 1 || c.Features < 2*c.MaxPerRow {
		bad("features = %d, want at least 1 and at least twice the maximum per row (%d)", c.Features, c.MaxPerRow)
	}
	if !finite(c.ZipfS) || c.ZipfS <= 1 {
		bad("zipf exponent = %v, want finite and > 1", c.ZipfS)
	}
	if !finite(c.Density) || c.Density <= 0 || c.Density > 1 {
		bad("density = %v, want in (0, 1]", c.Density)
	}
	if !finite(c.WeightStd) || c.WeightStd <= 0 {
		bad("weight std = %v, want finite and > 0", c.WeightStd)
	}
	if c.Informative < 0 {
		bad("informative ids = %d, want >= 0", c.Informative)
	}
	if !finite(c.PositiveRate) || c.PositiveRate <= 0 || c.PositiveRate >= 1 {
		bad("positive rate = %v, want in (0, 1)", c.PositiveRate)
	}
	return errors.Join(errs...)
}

// TestSet returns the configuration of a test set for the training set c:
// the same true model, rows rows, and another row seed, derived from
// c.RowSeed, so that the two sets are independent samples of the same
// distribution. Like any two samples they may share a few
// identical rows by chance, mostly short rows of frequent ids.
func (c Config) TestSet(rows int) Config {
	c.Rows = rows
	c.RowSeed = int64(splitmix64(uint64(c.RowSeed) ^ 0x7e57_5e7d_7e57_5e7d))
	return c
}

// splitmix64 is the SplitMix64 output function (Steele, Lea and Flood
// 2014): a bijective mix of x.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// calibrationRows is the number of rows over which the true intercept is
// calibrated to the wanted positive rate.
const calibrationRows = 10_000

// trueModel computes the true weight of an id from a hash of the model
// seed and the id, so that it needs no table; only its intercept depends
// on the row fields of the configuration, through the calibration.
type trueModel struct {
	seed      uint64
	maxID     uint64 // largest id with a possibly nonzero weight
	density   float64
	std       float64
	intercept float32
}

// newTrueModel returns c's true model, calibrating its intercept. c must
// be valid.
func newTrueModel(c Config) trueModel {
	m := trueModel{
		seed:    splitmix64(uint64(c.ModelSeed)),
		maxID:   uint64(c.Features),
		density: c.Density,
		std:     c.WeightStd,
	}
	if c.Informative > 0 {
		m.maxID = min(m.maxID, uint64(c.Informative))
	}
	// Sum the feature weights of rows drawn from a seed that depends on
	// the model seed only, and find the intercept whose mean predicted
	// probability over them is the wanted rate.
	d := newRowDrawer(c, int64(splitmix64(m.seed^0xca11_b4a7e)))
	sums := make([]float64, calibrationRows)
	for i := range sums {
		sums[i] = m.score(d.draw())
	}
	lo, hi := -64.0, 64.0
	for range 100 {
		mid := (lo + hi) / 2
		var p float64
		for _, s := range sums {
			p += lr.Sigmoid(mid + s)
		}
		if p/float64(len(sums)) < c.PositiveRate {
			lo = mid
		} else {
			hi = mid
		}
	}
	m.intercept = float32((lo + hi) / 2)
	return m
}

// weight returns the true weight of feature id: 0 above maxID or with
// probability 1-density, otherwise normal with mean 0 and standard
// deviation std (Box-Muller on two hashed uniforms).
func (m trueModel) weight(id uint64) float32 {
	if id > m.maxID {
		return 0
	}
	h := splitmix64(m.seed ^ splitmix64(id))
	if float64(h>>11)/(1<<53) >= m.density {
		return 0
	}
	h1 := splitmix64(h)
	h2 := splitmix64(h1)
	u1 := (float64(h1>>11) + 1) / (1 << 53) // in (0, 1]
	u2 := float64(h2>>11) / (1 << 53)
	return float32(m.std * math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2))
}

// score returns the sum of the true weights of ids, without the
// intercept.
func (m trueModel) score(ids []uint64) float64 {
	var z float64
	for _, id := range ids {
		z += float64(m.weight(id))
	}
	return z
}

// TrueModel returns the model the labels of c's rows are drawn from: the
// calibrated intercept at lr.InterceptKey and every nonzero true weight.
func TrueModel(c Config) (lr.Model, error) {
	if err := c.Validate(); err != nil {
		return lr.Model{}, err
	}
	m := newTrueModel(c)
	out := lr.Model{Keys: []uint64{lr.InterceptKey}, W: []float32{m.intercept}}
	for id := uint64(1); id <= m.maxID; id++ {
		if w := m.weight(id); w != 0 {
			out.Keys = append(out.Keys, id)
			out.W = append(out.W, w)
		}
	}
	return out, nil
}

// rowDrawer draws the feature ids of rows.
type rowDrawer struct {
	min, max int
	features int64
	rng      *rand.Rand
	zipf     *rand.Zipf
	keys     []uint64
	seen     map[uint64]struct{} // duplicate check for long rows
}

// shortRow is the longest row whose duplicate ids are found by a linear
// scan rather than a map.
const shortRow = 64

func newRowDrawer(c Config, seed int64) *rowDrawer {
	rng := rand.New(rand.NewSource(seed))
	d := &rowDrawer{
		min:      c.MinPerRow,
		max:      c.MaxPerRow,
		features: int64(c.Features),
		rng:      rng,
		zipf:     rand.NewZipf(rng, c.ZipfS, 1, uint64(c.Features-1)),
		keys:     make([]uint64, 0, c.MaxPerRow),
	}
	if c.MaxPerRow > shortRow {
		d.seen = make(map[uint64]struct{}, c.MaxPerRow)
	}
	return d
}

// draw returns the sorted ids of the next row, in a slice that the next
// call overwrites. After 64 Zipf draws per wanted id, which only a tiny
// id space needs, it draws the remaining ids uniformly.
func (d *rowDrawer) draw() []uint64 {
	n := d.min + d.rng.Intn(d.max-d.min+1)
	keys := d.keys[:0]
	clear(d.seen)
	for draws := 0; len(keys) < n; draws++ {
		var id uint64
		if draws < 64*n {
			id = d.zipf.Uint64() + 1
		} else {
			id = uint64(d.rng.Int63n(d.features)) + 1
		}
		if d.seen != nil {
			if _, dup := d.seen[id]; dup {
				continue
			}
			d.seen[id] = struct{}{}
		} else if slices.Contains(keys, id) {
			continue
		}
		keys = append(keys, id)
	}
	slices.Sort(keys)
	d.keys = keys
	return keys
}

// Reader yields the rows of a configuration in order, one at a time.
//
// The rows are drawn from one *rand.Rand of math/rand seeded with RowSeed
// (math/rand rather than math/rand/v2 for its Zipf generator and its
// promise of a stable sequence for a seed). For each row: the feature
// count, uniform in [MinPerRow, MaxPerRow]; distinct ids from the Zipf
// distribution, sorted; then the label, 1 with probability
// Sigmoid(intercept + Σ true weights of the ids). Every value is 1, as for
// one-hot CTR features.
//
// A Reader is not safe for concurrent use.
type Reader struct {
	rows   int
	row    int
	model  trueModel
	drawer *rowDrawer
	ones   []float32
}

// NewReader returns a Reader of the rows of c, or c's validation error.
func NewReader(c Config) (*Reader, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	r := &Reader{
		rows:   c.Rows,
		model:  newTrueModel(c),
		drawer: newRowDrawer(c, c.RowSeed),
		ones:   make([]float32, c.MaxPerRow),
	}
	for i := range r.ones {
		r.ones[i] = 1
	}
	return r, nil
}

// Intercept returns the true model's intercept.
func (r *Reader) Intercept() float32 { return r.model.intercept }

// Next returns the next row and true, or false after the last row. The
// row's slices belong to the Reader and are overwritten by the next call:
// copy them to keep them.
func (r *Reader) Next() (lr.Example, bool) {
	if r.row >= r.rows {
		return lr.Example{}, false
	}
	r.row++
	keys := r.drawer.draw()
	z := float64(r.model.intercept) + r.model.score(keys)
	var label float32
	if r.drawer.rng.Float64() < lr.Sigmoid(z) {
		label = 1
	}
	n := len(keys)
	return lr.Example{Label: label, Keys: keys, Vals: r.ones[:n:n]}, true
}

// Examples returns the rows of c in memory: the same rows, in the same
// order, that Generate writes. The rows share a few large arrays.
func Examples(c Config) ([]lr.Example, error) {
	r, err := NewReader(c)
	if err != nil {
		return nil, err
	}
	const chunk = 1 << 16
	out := make([]lr.Example, 0, c.Rows)
	var keys []uint64
	var vals []float32
	for {
		ex, ok := r.Next()
		if !ok {
			return out, nil
		}
		n := len(ex.Keys)
		if cap(keys)-len(keys) < n {
			keys = make([]uint64, 0, max(chunk, n))
			vals = make([]float32, 0, max(chunk, n))
		}
		start := len(keys)
		keys = append(keys, ex.Keys...)
		vals = append(vals, ex.Vals...)
		out = append(out, lr.Example{
			Label: ex.Label,
			Keys:  keys[start : start+n : start+n],
			Vals:  vals[start : start+n : start+n],
		})
	}
}

// Stats describes a generated data set.
type Stats struct {
	Rows      int   // rows written (fully, to the buffer)
	Positives int   // rows with label 1, among Rows
	NonZeros  int64 // feature entries of Rows
	Bytes     int64 // bytes accepted by the destination writer
}

// PositiveRate returns Positives/Rows, or 0 for no rows.
func (s Stats) PositiveRate() float64 {
	if s.Rows == 0 {
		return 0
	}
	return float64(s.Positives) / float64(s.Rows)
}

// Generate writes the rows of c to w in libsvm format, one line per row:
//
//	label id:1 id:1 ...
//
// with label 0 or 1 and ids ascending. The output is the same bytes for
// the same configuration on every run (with the same Go release and
// architecture; the true weights use math.Log and math.Cos). Generate
// buffers its writes and returns the statistics of what it wrote, with an
// error from c.Validate or w.
func Generate(c Config, w io.Writer) (Stats, error) {
	var st Stats
	r, err := NewReader(c)
	if err != nil {
		return st, err
	}
	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 1<<16)
	line := make([]byte, 0, 256)
	for {
		ex, ok := r.Next()
		if !ok {
			break
		}
		line = append(line[:0], '0')
		if ex.Label == 1 {
			line[0] = '1'
		}
		for _, id := range ex.Keys {
			line = append(line, ' ')
			line = strconv.AppendUint(line, id, 10)
			line = append(line, ":1"...)
		}
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			st.Bytes = cw.n
			return st, fmt.Errorf("gen: write row %d: %w", st.Rows, err)
		}
		st.Rows++
		st.Positives += int(ex.Label)
		st.NonZeros += int64(len(ex.Keys))
	}
	err = bw.Flush()
	st.Bytes = cw.n
	if err != nil {
		return st, fmt.Errorf("gen: write: %w", err)
	}
	return st, nil
}

// countingWriter counts the bytes written to w.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteFile writes the rows of c to the file path, which it creates or
// truncates.
func WriteFile(path string, c Config) (Stats, error) {
	f, err := os.Create(path)
	if err != nil {
		return Stats{}, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	st, err := Generate(c, bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return st, fmt.Errorf("write %s: %w", path, err)
	}
	return st, nil
}

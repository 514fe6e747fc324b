package dense

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/spindle-ps/spindle/io/records"
)

// Data is a data set of dense examples: row i's features are
// X[i*D:(i+1)*D], its class Y[i].
type Data struct {
	D int
	X []float64
	Y []int32
}

// Len is the number of examples.
func (d *Data) Len() int { return len(d.Y) }

// Row returns example i's features.
func (d *Data) Row(i int) []float64 { return d.X[i*d.D : (i+1)*d.D] }

// MaxClasses and MaxFeatures bound a model's classes and features.
const (
	MaxClasses  = 1 << 10
	MaxFeatures = 1 << 20
)

// ErrSyntax is wrapped by the errors of ParseLine. It is also
// records.ErrSyntax (errors.Is), so that a worker ending on it exits
// with conf.ExitBadInput (feed.ExitStatus) and is not started again.
var ErrSyntax error = syntaxError{}

type syntaxError struct{}

func (syntaxError) Error() string { return "dense: malformed line" }

func (syntaxError) Is(target error) bool { return target == records.ErrSyntax }

// ParseLine parses a line "label,f1,...,fd" into d (which it appends
// to): a class 0..classes-1 and exactly d.D features, each a finite
// number of at most MaxFeature in absolute value. d.D of 0 is set from
// the first line. Fields may be surrounded by spaces.
func (d *Data) ParseLine(line []byte, classes int) error {
	n := bytes.Count(line, []byte{','})
	if n > MaxFeatures {
		return fmt.Errorf("%w: more than %d features", ErrSyntax, MaxFeatures)
	}
	if n == 0 {
		return fmt.Errorf("%w: no features (want label,f1,...,fd)", ErrSyntax)
	}
	if d.D == 0 {
		d.D = n
	}
	if n != d.D {
		return fmt.Errorf("%w: %d features, want %d", ErrSyntax, n, d.D)
	}
	start := len(d.X)
	for col := 0; col <= n; col++ {
		field := line
		if i := bytes.IndexByte(line, ','); i >= 0 {
			field, line = line[:i], line[i+1:]
		}
		field = bytes.TrimSpace(field)
		if col == 0 {
			y, err := strconv.Atoi(string(field))
			if err != nil || y < 0 || y >= classes {
				d.X = d.X[:start]
				return fmt.Errorf("%w: label %q: want a class 0..%d", ErrSyntax, field, classes-1)
			}
			d.Y = append(d.Y, int32(y))
			continue
		}
		v, err := strconv.ParseFloat(string(field), 64)
		if err != nil || math.IsNaN(v) || math.Abs(v) > MaxFeature {
			d.X, d.Y = d.X[:start], d.Y[:len(d.Y)-1]
			return fmt.Errorf("%w: feature %d %q: want a number of at most %d in absolute value", ErrSyntax, col, field, MaxFeature)
		}
		d.X = append(d.X, v)
	}
	return nil
}

// GenConfig describes a generated data set: examples drawn from a true
// softmax model of Features standard normal features and Classes
// classes.
type GenConfig struct {
	Rows, Features, Classes int
	ModelSeed, RowSeed      uint64
}

// DefaultGen is ps-dense gen's default.
func DefaultGen() GenConfig {
	return GenConfig{Rows: 20000, Features: 20, Classes: 4, ModelSeed: 1, RowSeed: 2}
}

// Validate checks the bounds of c.
func (c GenConfig) Validate() error {
	var errs []error
	if c.Rows < 1 {
		errs = append(errs, fmt.Errorf("rows %d: need at least 1", c.Rows))
	}
	if c.Features < 1 || c.Features > MaxFeatures {
		errs = append(errs, fmt.Errorf("features %d: want 1..%d", c.Features, MaxFeatures))
	}
	if c.Classes < 2 || c.Classes > MaxClasses {
		errs = append(errs, fmt.Errorf("classes %d: want 2..%d", c.Classes, MaxClasses))
	}
	return errors.Join(errs...)
}

// TrueModel is the model the examples of c are drawn from.
func (c GenConfig) TrueModel() Model {
	m := NewModel(c.Features, c.Classes)
	r := rand.New(rand.NewPCG(c.ModelSeed, 0x6d6f64656c))
	for i := range m.W {
		m.W[i] = r.NormFloat64()
	}
	return m
}

// Generate writes c.Rows lines "label,f1,...,fd" to w: standard normal
// features (printed with 4 decimals), the label drawn from the true
// model's class probabilities.
func (c GenConfig) Generate(w io.Writer) error {
	if err := c.Validate(); err != nil {
		return err
	}
	m := c.TrueModel()
	r := rand.New(rand.NewPCG(c.RowSeed, 0x726f7773))
	bw := bufio.NewWriter(w)
	x := make([]float64, c.Features)
	p := make([]float64, c.Classes)
	var b []byte
	for range c.Rows {
		for j := range x {
			// Rounded as printed, so the label follows the data read.
			x[j], _ = strconv.ParseFloat(strconv.FormatFloat(r.NormFloat64(), 'f', 4, 64), 64)
		}
		m.probs(x, p)
		u, y := r.Float64(), c.Classes-1
		for k, pk := range p {
			if u < pk {
				y = k
				break
			}
			u -= pk
		}
		b = strconv.AppendInt(b[:0], int64(y), 10)
		for _, v := range x {
			b = append(b, ',')
			b = strconv.AppendFloat(b, v, 'f', 4, 64)
		}
		b = append(b, '\n')
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

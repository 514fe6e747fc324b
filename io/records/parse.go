package records

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Example is one training record: a label, an instance weight and
// sparse features, Keys strictly increasing with Vals[i] the value of
// Keys[i]. Weight is positive where the record gives one; 0 means it
// gives none, and the example weighs 1. Parsers reuse the Keys and Vals
// slices of the Example they are given.
type Example struct {
	Label  float32
	Weight float32
	Keys   []uint64
	Vals   []float32
}

func (ex *Example) reset() {
	ex.Label = 0
	ex.Weight = 0
	ex.Keys = ex.Keys[:0]
	ex.Vals = ex.Vals[:0]
}

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("records: malformed record")

func syntaxErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSyntax, fmt.Sprintf(format, args...))
}

// maxTokenQuote bounds how much of a bad token an error quotes.
const maxTokenQuote = 40

func quote(b []byte) string {
	if len(b) > maxTokenQuote {
		return strconv.Quote(string(b[:maxTokenQuote])) + "…"
	}
	return strconv.Quote(string(b))
}

// ParseLibSVM parses one libsvm line into ex:
//
//	label[:weight] [qid:N] index:value index:value ... [# comment]
//
// separated by spaces or tabs. The label is 0 or 1, or -1 or +1 (mapped
// to 0 and 1), in any float notation ("1", "+1", "1.0"). An instance
// weight after the label, as dmlc-core reads it, is a positive finite
// float32 (ex.Weight; without one, ex.Weight is 0 and the example weighs
// 1). A query id (qid:N, N a uint64, as ranking data has it) is read and
// ignored, and so is everything from a '#' to the line's end, as
// dmlc-core and scikit-learn's svmlight reader do. An index is a decimal
// uint64, taken as written (no shift between 0- and 1-based data); a
// value is a finite float32. Features may appear in any order: ex gets
// them sorted by index; a repeated index is an error. Every error wraps
// ErrSyntax.
func ParseLibSVM(line []byte, ex *Example) error {
	ex.reset()
	if c := bytes.IndexByte(line, '#'); c >= 0 {
		line = line[:c]
	}
	i := skipSpace(line, 0)
	j := skipToken(line, i)
	if i == j {
		return syntaxErr("empty record")
	}
	labelTok := line[i:j]
	if c := bytes.IndexByte(labelTok, ':'); c >= 0 {
		w, err := parseWeight(labelTok[c+1:])
		if err != nil {
			return syntaxErr("label %s: instance weight: %v", quote(labelTok), err)
		}
		ex.Weight, labelTok = w, labelTok[:c]
	}
	label, err := parseLabel(labelTok)
	if err != nil {
		return err
	}
	ex.Label = label
	if i = skipSpace(line, j); bytes.HasPrefix(line[i:], qidPrefix) {
		j = skipToken(line, i)
		if _, ok := parseUint64(line[i+len(qidPrefix) : j]); !ok {
			return syntaxErr("query id %s: not a uint64", quote(line[i:j]))
		}
	}
	sorted := true
	for i = skipSpace(line, j); i < len(line); i = skipSpace(line, j) {
		key, v, end, ok := scanFeature(line, i)
		if !ok {
			if key, v, end, err = readFeature(line, i); err != nil {
				return err
			}
		}
		j = end
		val, err := parseValue(v)
		if err != nil {
			return syntaxErr("feature %s: %v", quote(line[i:j]), err)
		}
		if n := len(ex.Keys); n > 0 && key <= ex.Keys[n-1] {
			if key == ex.Keys[n-1] {
				return syntaxErr("feature index %d repeated", key)
			}
			sorted = false
		}
		ex.Keys = append(ex.Keys, key)
		ex.Vals = append(ex.Vals, val)
	}
	if !sorted {
		sort.Sort(byKey{ex})
		for k := 1; k < len(ex.Keys); k++ {
			if ex.Keys[k] == ex.Keys[k-1] {
				return syntaxErr("feature index %d repeated", ex.Keys[k])
			}
		}
	}
	return nil
}

// qidPrefix starts a libsvm line's query id.
var qidPrefix = []byte("qid:")

// libsvmComment reports whether a libsvm line holds a comment only: its
// first character that is not a space is '#'. Readers skip such lines, as
// they skip blank ones.
func libsvmComment(line []byte) bool {
	i := skipSpace(line, 0)
	return i < len(line) && line[i] == '#'
}

// CSVOptions describes a CSV layout.
type CSVOptions struct {
	// LabelColumn is the 0-based column of the label.
	LabelColumn int
	// Comma separates fields; 0 means ','.
	Comma byte
}

// ParseCSV parses one CSV line into ex: the label column (0/1 or -1/+1,
// as for libsvm) and dense numeric features whose keys are their column
// indexes (0-based, counting the label column). Fields are trimmed of
// spaces and tabs; an empty field is a missing value and gets no key.
// Quoted fields are not supported. Every error wraps ErrSyntax.
func ParseCSV(line []byte, opts CSVOptions, ex *Example) error {
	ex.reset()
	comma := opts.Comma
	if comma == 0 {
		comma = ','
	}
	if opts.LabelColumn < 0 {
		return fmt.Errorf("records: negative label column %d", opts.LabelColumn)
	}
	sawLabel := false
	col := 0
	for start := 0; ; col++ {
		end := len(line)
		i := bytes.IndexByte(line[start:], comma)
		last := i < 0
		if !last {
			end = start + i
		}
		field := trimSpace(line[start:end])
		if col == opts.LabelColumn {
			if len(field) == 0 {
				return syntaxErr("label column %d is empty", col)
			}
			label, err := parseLabel(field)
			if err != nil {
				return err
			}
			ex.Label, sawLabel = label, true
		} else if len(field) > 0 {
			if field[0] == '"' {
				return syntaxErr("column %d: quoted fields are not supported", col)
			}
			val, err := parseValue(field)
			if err != nil {
				return syntaxErr("column %d %s: %v", col, quote(field), err)
			}
			ex.Keys = append(ex.Keys, uint64(col))
			ex.Vals = append(ex.Vals, val)
		}
		if last {
			break
		}
		start = end + 1
	}
	if !sawLabel {
		return syntaxErr("%d columns, no label column %d", col+1, opts.LabelColumn)
	}
	return nil
}

func parseLabel(tok []byte) (float32, error) {
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil {
		return 0, syntaxErr("label %s is not a number", quote(tok))
	}
	switch f {
	case 0, -1:
		return 0, nil
	case 1:
		return 1, nil
	}
	return 0, syntaxErr("label %s: want 0/1 or -1/+1", quote(tok))
}

var errNotFinite = errors.New("value is not a finite float32")

// parseWeight parses an instance weight: a positive finite float32. A
// weight of 0 is refused rather than read as "none": a line that should
// count for nothing is better left out of the data.
func parseWeight(tok []byte) (float32, error) {
	w, err := parseValue(tok)
	if err != nil {
		return 0, err
	}
	if !(w > 0) {
		return 0, errors.New("want a positive number (a line that should count for nothing is better left out)")
	}
	return w, nil
}

func parseValue(tok []byte) (float32, error) {
	if len(tok) == 1 && tok[0]-'0' <= 9 { // binary features' "1", most often
		return float32(tok[0] - '0'), nil
	}
	if v, ok := fastFloat32(tok); ok {
		return v, nil
	}
	f, err := strconv.ParseFloat(string(tok), 32)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return 0, errNotFinite
		}
		return 0, errors.New("value is not a number")
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errNotFinite
	}
	return float32(f), nil
}

// pow10f32 holds the powers of ten a float32 represents exactly.
var pow10f32 = [...]float32{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10}

// fastFloat32 parses the common decimal forms, [+-]digits[.digits], when
// their significant digits make an integer m ≤ 2^24 and there are at
// most 10 digits after the point: then m and 10^k are exact in float32,
// and one division rounds correctly, to the float32 strconv.ParseFloat
// would return (Clinger's fast path). Anything else (exponents, more
// digits, inf, nan, hex, underscores, malformed tokens) is left to
// strconv: ok is false.
func fastFloat32(tok []byte) (float32, bool) {
	i, neg := 0, false
	if len(tok) > 0 && (tok[0] == '-' || tok[0] == '+') {
		neg, i = tok[0] == '-', 1
	}
	var m uint32
	frac, digits, dot := 0, 0, false
	for ; i < len(tok); i++ {
		c := tok[i]
		switch {
		case c >= '0' && c <= '9':
			digits++
			m = m*10 + uint32(c-'0')
			if m > 1<<24 {
				return 0, false
			}
			if dot {
				frac++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return 0, false
		}
	}
	if digits == 0 || frac >= len(pow10f32) {
		return 0, false
	}
	v := float32(m) / pow10f32[frac]
	if neg {
		v = -v
	}
	return v, true
}

// parseUint64 parses decimal digits (no sign, no "_").
func parseUint64(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (math.MaxUint64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// scanFeature reads the feature token at line[i], not a space, in one
// pass when it is the common form: an index of at most 19 decimal digits
// (which cannot overflow), a colon, and the value, whose bytes it
// returns with the token's end. Otherwise it reports false, and
// readFeature reads the token and says what is wrong with it.
func scanFeature(line []byte, i int) (key uint64, val []byte, end int, ok bool) {
	start := i
	for ; i < len(line); i++ {
		d := line[i] - '0'
		if d > 9 {
			break
		}
		key = key*10 + uint64(d)
	}
	if i == start || i-start > 19 || i == len(line) || line[i] != ':' {
		return 0, nil, 0, false
	}
	end = skipToken(line, i+1)
	return key, line[i+1 : end], end, true
}

// readFeature reads the feature token at line[i], index:value, and
// returns the index, the value's bytes and the token's end; an error
// wraps ErrSyntax.
func readFeature(line []byte, i int) (key uint64, val []byte, end int, err error) {
	end = skipToken(line, i)
	tok := line[i:end]
	c := bytes.IndexByte(tok, ':')
	if c < 0 {
		return 0, nil, 0, syntaxErr("feature %s: want index:value", quote(tok))
	}
	key, ok := parseUint64(tok[:c])
	if !ok {
		return 0, nil, 0, syntaxErr("feature %s: index is not a uint64", quote(tok))
	}
	return key, tok[c+1:], end, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func skipToken(b []byte, i int) int {
	for i < len(b) && !isSpace(b[i]) {
		i++
	}
	return i
}

func trimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

// byKey sorts an Example's features by key.
type byKey struct{ ex *Example }

func (s byKey) Len() int           { return len(s.ex.Keys) }
func (s byKey) Less(i, j int) bool { return s.ex.Keys[i] < s.ex.Keys[j] }
func (s byKey) Swap(i, j int) {
	s.ex.Keys[i], s.ex.Keys[j] = s.ex.Keys[j], s.ex.Keys[i]
	s.ex.Vals[i], s.ex.Vals[j] = s.ex.Vals[j], s.ex.Vals[i]
}

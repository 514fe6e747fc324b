package records

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spindle-ps/spindle/io/split"
)

// The formats a Reader parses.
const (
	FormatLibSVM = "libsvm"
	FormatCSV    = "csv"
)

// Options configures a Reader.
type Options struct {
	// Format is FormatLibSVM or FormatCSV.
	Format string
	// MaxBadRecords is how many malformed records (including over-long
	// lines) a Reader skips, counting them in Bad; the next one is an
	// error. 0 means the first malformed record is an error.
	MaxBadRecords int
	// CSV is the layout of FormatCSV records.
	CSV CSVOptions
	// CSVHeader says the first line of each CSV file is a header, to be
	// skipped (by the split that starts at offset 0).
	CSVHeader bool
}

// LineSource is where a Reader gets its lines; *split.LineReader is one.
type LineSource interface {
	// Next returns the next line, valid until the following call, and
	// its byte offset; io.EOF at the end.
	Next() (line []byte, offset int64, err error)
	// URI names the file, for errors.
	URI() string
}

// lineFinder is a LineSource that can say which line of its file starts
// at an offset (*split.LineReader can), for the error that stops a
// Reader.
type lineFinder interface {
	LineAt(offset int64) (line int64, ok bool)
}

// RecordError reports a malformed record: the file's URI, the byte offset
// at which the record starts (in the decompressed stream, for a gzip
// file), its line when known, and what is wrong (wrapping ErrSyntax, or
// split.ErrLineTooLong).
type RecordError struct {
	URI    string
	Offset int64
	// Line is the record's line in the file, counted from 1; 0 when not
	// known (see LineSource).
	Line int64
	// Text is the start of the record, at most 80 bytes.
	Text string
	Err  error
}

func (e *RecordError) Error() string {
	msg := strings.TrimPrefix(strings.TrimPrefix(e.Err.Error(), "records: "), "split: ")
	at := split.Place(e.URI, e.Line, e.Offset)
	if e.Text == "" {
		return fmt.Sprintf("records: %s: %s", at, msg)
	}
	return fmt.Sprintf("records: %s: %s (record %q)", at, msg, e.Text)
}

func (e *RecordError) Unwrap() error { return e.Err }

const (
	maxRecordText = 80
	maxBadSamples = 10
)

// Reader parses the records of a LineSource, skipping empty lines (and,
// in libsvm, lines that hold only a comment). It is
// not safe for concurrent use.
type Reader struct {
	src     LineSource
	opts    Options
	parse   func([]byte, *Example) error
	offsets []int64 // of the malformed records met, at most MaxBadRecords+1
	samples []*RecordError
	err     error // sticky
}

// NewReader returns a Reader of src. Closing src stays the caller's job.
func NewReader(src LineSource, opts Options) (*Reader, error) {
	if opts.MaxBadRecords < 0 {
		return nil, fmt.Errorf("records: negative MaxBadRecords %d", opts.MaxBadRecords)
	}
	r := &Reader{src: src, opts: opts}
	switch opts.Format {
	case FormatLibSVM:
		r.parse = ParseLibSVM
	case FormatCSV:
		if opts.CSV.LabelColumn < 0 {
			return nil, fmt.Errorf("records: negative CSV label column %d", opts.CSV.LabelColumn)
		}
		csv := opts.CSV
		r.parse = func(line []byte, ex *Example) error { return ParseCSV(line, csv, ex) }
	default:
		return nil, fmt.Errorf("records: unknown format %q (want %s or %s)", opts.Format, FormatLibSVM, FormatCSV)
	}
	return r, nil
}

// Next parses the next record into ex, reusing its slices. It returns
// io.EOF at the end of the source. A malformed record beyond the
// MaxBadRecords budget is a *RecordError; errors are sticky.
func (r *Reader) Next(ex *Example) error {
	if r.err != nil {
		return r.err
	}
	for {
		line, off, err := r.src.Next()
		if err != nil {
			var le *split.LineError
			if errors.Is(err, split.ErrLineTooLong) && errors.As(err, &le) {
				if err := r.skip(le.Offset, nil, le.Err); err != nil {
					return err
				}
				continue
			}
			if !errors.Is(err, io.EOF) {
				err = fmt.Errorf("records: %w", err)
			}
			r.err = err
			return err
		}
		if isBlank(line) || r.opts.Format == FormatLibSVM && libsvmComment(line) {
			continue
		}
		if off == 0 && r.opts.CSVHeader && r.opts.Format == FormatCSV {
			continue
		}
		if err := r.parse(line, ex); err != nil {
			if err := r.skip(off, line, err); err != nil {
				return err
			}
			continue
		}
		return nil
	}
}

// skip counts a bad record, and returns the error to stop with when the
// budget is spent.
func (r *Reader) skip(off int64, line []byte, err error) error {
	if len(line) > maxRecordText {
		line = line[:maxRecordText]
	}
	r.offsets = append(r.offsets, off)
	stop := len(r.offsets) > r.opts.MaxBadRecords
	if !stop && len(r.samples) >= maxBadSamples {
		return nil
	}
	rerr := &RecordError{URI: r.src.URI(), Offset: off, Text: string(line), Err: err}
	if stop {
		if lf, ok := r.src.(lineFinder); ok {
			rerr.Line, _ = lf.LineAt(off)
		}
		r.err = rerr
		return rerr
	}
	r.samples = append(r.samples, rerr)
	return nil
}

// Bad returns how many malformed records were skipped.
func (r *Reader) Bad() int { return len(r.offsets) }

// BadOffsets returns the byte offsets of the malformed records met (those
// skipped, and the one that stopped the Reader), in order.
func (r *Reader) BadOffsets() []int64 { return r.offsets }

// BadSamples returns the first (up to ten) malformed records skipped,
// without their lines (Line 0): split.LineReader.LineAt finds them.
func (r *Reader) BadSamples() []*RecordError { return r.samples }

func isBlank(b []byte) bool {
	for _, c := range b {
		if !isSpace(c) {
			return false
		}
	}
	return true
}

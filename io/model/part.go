package model

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"strconv"
)

// Number is the type of the values a reader delivers.
type Number interface{ ~float32 | ~float64 }

const (
	// MaxWidth is the largest number of values per key of a table, the
	// parameter tables' limit.
	MaxWidth = 1 << 16
	// maxModelLine bounds a line of a text part.
	maxModelLine = 16 << 20

	binaryMagic  = "SPMODEL1"
	binaryHeader = 16
	binaryTrail  = 4
	elemFloat32  = 1
	elemFloat64  = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// A text part holds one line per key, in ascending key order:
//
//	key<TAB>v1 v2 … vW
//
// the key in decimal, the W values separated by single spaces, each the
// shortest decimal that reads back to the same value of the table's
// element type. Keys whose values are all exactly zero are left out (a
// reader takes an absent key as all zeros). hdfs dfs -text and -cat show
// it as it is. Older models separate values by tabs; readers accept both.
//
// A binary part, all integers little-endian, E = element size (4 for
// float32, 8 for float64), W = width:
//
//	offset  size  field
//	     0     8  magic "SPMODEL1"
//	     8     1  element type: 1 = float32, 2 = float64
//	     9     3  reserved, 0
//	    12     4  W (uint32), 1..65536
//	    16        records of 8 + W*E bytes, in ascending key order:
//	              +-----------+-------------+
//	              | key (u64) | W values    |
//	              +-----------+-------------+
//	 end-4     4  CRC-32C (Castagnoli) of bytes [0, end-4) (uint32)
//
// The file's size is 20 plus a whole number of records, which the reader
// checks before it reads one. All-zero keys are left out as in text parts.

// allZero reports whether every value is zero.
func allZero(vals []float64) bool {
	for _, v := range vals {
		if v != 0 {
			return false
		}
	}
	return true
}

// bitSize returns the float size of element type elem for formatting and
// parsing: 32 or 64.
func bitSize(elem string) int {
	if elem == "float64" {
		return 64
	}
	return 32
}

// encodeText writes t as a text part to w.
func encodeText(w io.Writer, t Table) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	bits := bitSize(t.Elem())
	var line []byte
	var err error
	t.Range(func(key uint64, vals, _ []float64) bool {
		if allZero(vals) {
			return true
		}
		line = strconv.AppendUint(line[:0], key, 10)
		for i, v := range vals {
			sep := byte(' ')
			if i == 0 {
				sep = '\t'
			}
			line = append(line, sep)
			line = strconv.AppendFloat(line, v, 'g', -1, bits)
		}
		line = append(line, '\n')
		_, err = bw.Write(line)
		return err == nil
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// crcWriter feeds what it writes to a CRC-32C.
type crcWriter struct {
	w   io.Writer
	crc uint32
}

func (c *crcWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.crc = crc32.Update(c.crc, castagnoli, b[:n])
	return n, err
}

// encodeBinary writes t as a binary part to w.
func encodeBinary(w io.Writer, t Table) error {
	cw := &crcWriter{w: w}
	bw := bufio.NewWriterSize(cw, 1<<20)
	width := t.Width()
	if width < 1 || width > MaxWidth {
		return fmt.Errorf("width %d, want 1..%d", width, MaxWidth)
	}
	var hdr [binaryHeader]byte
	copy(hdr[:8], binaryMagic)
	esz := 4
	hdr[8] = elemFloat32
	if t.Elem() == "float64" {
		hdr[8], esz = elemFloat64, 8
	}
	binary.LittleEndian.PutUint32(hdr[12:], uint32(width))
	if _, err := bw.Write(hdr[:]); err != nil {
		return err
	}
	rec := make([]byte, 8+width*esz)
	var err error
	t.Range(func(key uint64, vals, _ []float64) bool {
		if allZero(vals) {
			return true
		}
		if len(vals) != width {
			err = fmt.Errorf("key %d: %d values, want %d", key, len(vals), width)
			return false
		}
		binary.LittleEndian.PutUint64(rec, key)
		for i, v := range vals {
			if esz == 4 {
				binary.LittleEndian.PutUint32(rec[8+4*i:], math.Float32bits(float32(v)))
			} else {
				binary.LittleEndian.PutUint64(rec[8+8*i:], math.Float64bits(v))
			}
		}
		_, err = bw.Write(rec)
		return err == nil
	})
	if err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	var tr [binaryTrail]byte
	binary.LittleEndian.PutUint32(tr[:], cw.crc)
	_, err = w.Write(tr[:])
	return err
}

// partSpec is what a reader knows of a part before it opens it.
type partSpec struct {
	uri    string
	size   int64  // the file's size
	width  int    // values per key; 0: any (models without a TablesFile)
	elem   string // "float32" or "float64": how text values are parsed
	format string // the manifest's format of the part; "" to detect
}

// decodePart reads a part from r, text or binary (told by its first
// bytes, which must agree with spec.format when that is set), calling fn
// for each key with its values; vals is reused between calls. Every
// length is bounded before it is used: a text line by maxModelLine, a
// binary part's records by its size. A binary part's CRC is checked at
// its end: an error then means the records delivered are not to be
// trusted.
func decodePart[V Number](r io.Reader, spec partSpec, fn func(key uint64, vals []V) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	head, err := br.Peek(len(binaryMagic))
	isBinary := err == nil && string(head) == binaryMagic
	switch {
	case spec.format == FormatBinary && !isBinary:
		return fmt.Errorf("model: %s: not a binary part (no %q magic)", spec.uri, binaryMagic)
	case spec.format == Format && isBinary:
		return fmt.Errorf("model: %s: a binary part where the manifest says text", spec.uri)
	case isBinary:
		return decodeBinary(br, spec, fn)
	}
	return decodeText(br, spec, fn)
}

func decodeText[V Number](br *bufio.Reader, spec partSpec, fn func(key uint64, vals []V) error) error {
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 64<<10), maxModelLine)
	bits := bitSize(spec.elem)
	var vals []V
	line := 0
	for sc.Scan() {
		line++
		b := sc.Bytes()
		tab := bytes.IndexByte(b, '\t')
		if tab < 0 {
			return fmt.Errorf("model: %s line %d: want key<TAB>values", spec.uri, line)
		}
		key, err := strconv.ParseUint(string(b[:tab]), 10, 64)
		if err != nil {
			return fmt.Errorf("model: %s line %d: key %q: want a decimal uint64", spec.uri, line, b[:tab])
		}
		vals = vals[:0]
		rest := b[tab+1:]
		for {
			end := bytes.IndexAny(rest, " \t")
			field := rest
			if end >= 0 {
				field = rest[:end]
			}
			v, err := strconv.ParseFloat(string(field), bits)
			if err != nil {
				return fmt.Errorf("model: %s line %d: value %q: want a number", spec.uri, line, field)
			}
			if len(vals) == MaxWidth {
				return fmt.Errorf("model: %s line %d: more than %d values", spec.uri, line, MaxWidth)
			}
			vals = append(vals, V(v))
			if end < 0 {
				break
			}
			rest = rest[end+1:]
		}
		if spec.width > 0 && len(vals) != spec.width {
			return fmt.Errorf("model: %s line %d: %d values, the table has %d per key", spec.uri, line, len(vals), spec.width)
		}
		if err := fn(key, vals); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("model: %s line %d: longer than %d bytes", spec.uri, line+1, maxModelLine)
		}
		return fmt.Errorf("model: %s: %w", spec.uri, err)
	}
	return nil
}

func decodeBinary[V Number](br *bufio.Reader, spec partSpec, fn func(key uint64, vals []V) error) error {
	var hdr [binaryHeader]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return fmt.Errorf("model: %s: binary header: %w", spec.uri, noEOF(err))
	}
	esz := 0
	switch hdr[8] {
	case elemFloat32:
		esz = 4
	case elemFloat64:
		esz = 8
	default:
		return fmt.Errorf("model: %s: element type %d, want 1 (float32) or 2 (float64)", spec.uri, hdr[8])
	}
	if hdr[9] != 0 || hdr[10] != 0 || hdr[11] != 0 {
		return fmt.Errorf("model: %s: reserved header bytes are not zero", spec.uri)
	}
	width := binary.LittleEndian.Uint32(hdr[12:])
	if width < 1 || width > MaxWidth {
		return fmt.Errorf("model: %s: width %d, want 1..%d", spec.uri, width, MaxWidth)
	}
	if spec.width > 0 && int(width) != spec.width {
		return fmt.Errorf("model: %s: width %d, the table has %d", spec.uri, width, spec.width)
	}
	recSize := int64(8 + int(width)*esz)
	body := spec.size - binaryHeader - binaryTrail
	if body < 0 || body%recSize != 0 {
		return fmt.Errorf("model: %s: %d bytes is not a whole number of %d-byte records", spec.uri, spec.size, recSize)
	}
	crc := crc32.Update(0, castagnoli, hdr[:])
	rec := make([]byte, recSize)
	vals := make([]V, width)
	for i := int64(0); i < body/recSize; i++ {
		if _, err := io.ReadFull(br, rec); err != nil {
			return fmt.Errorf("model: %s: record %d: %w", spec.uri, i, noEOF(err))
		}
		crc = crc32.Update(crc, castagnoli, rec)
		for j := range vals {
			if esz == 4 {
				vals[j] = V(math.Float32frombits(binary.LittleEndian.Uint32(rec[8+4*j:])))
			} else {
				vals[j] = V(math.Float64frombits(binary.LittleEndian.Uint64(rec[8+8*j:])))
			}
		}
		if err := fn(binary.LittleEndian.Uint64(rec), vals); err != nil {
			return err
		}
	}
	var tr [binaryTrail]byte
	if _, err := io.ReadFull(br, tr[:]); err != nil {
		return fmt.Errorf("model: %s: trailer: %w", spec.uri, noEOF(err))
	}
	if want := binary.LittleEndian.Uint32(tr[:]); crc != want {
		return fmt.Errorf("model: %s: crc mismatch: computed %08x, trailer says %08x", spec.uri, crc, want)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		return fmt.Errorf("model: %s: data after the trailer", spec.uri)
	}
	return nil
}

// noEOF reports a file that ended early as io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Package model is the format of the models Spindle jobs write: the
// servers' writer (TableWriter), the launcher's commit (Commit) and a
// reader (Read, ReadTable, ReadManifest).
//
// # Layout
//
// A model is a directory (local or HDFS). A model of one table:
//
//	part-00000        the part of server 0 (its rank, five digits, as Hadoop
//	part-00001        numbers parts), text or binary
//	…
//	_tables.json      the tables: name, directory, width, element type and
//	                  part format, written by server 0 (TablesFile)
//	_manifest.json    the format, the job, every table with its parts and
//	                  their sizes, how the job trained (ManifestFile)
//	_SUCCESS          empty, written last: without it there is no model
//
// A model of several tables puts each table's parts in a directory named
// after it, <output>/<table>/part-NNNNN, beside the same three files.
// Each part is written under a temporary name and renamed
// (dfs.WriteAtomic). Commit, which the launcher runs once every task
// exited 0, checks that every table has a part from every server before
// it writes the manifest and then _SUCCESS; the readers refuse a
// directory without _SUCCESS (ErrIncomplete).
//
// The manifest's format is "spindle-text/v1" (Format) for a model of one
// table in text parts, as models were before tables existed (it lists the
// parts in Parts, and the table in Tables), and "spindle-model/v2"
// (FormatTables) for any other; its Tables say where each table's parts
// are and in which format. A model written by a program that writes its
// own text parts, without _tables.json, has format "spindle-text/v1" and
// no Tables.
//
// # Part formats
//
// Text parts (PartText, "spindle-text/v1") are lines
//
//	key<TAB>v1 v2 … vW
//
// in ascending key order, the key in decimal and the W values separated
// by spaces, each the shortest decimal that reads back to the same value
// of the table's element type. Hadoop's own tools show them as they are
// (hdfs dfs -text, -cat).
//
// Binary parts (PartBinary, "spindle-binary/v1") are faster to load: a
// 16-byte header ("SPMODEL1", element type, width), fixed-size records
// (key, W little-endian values) in ascending key order and a CRC-32C
// trailer; see part.go for the layout.
//
// In both, keys whose values are all exactly zero are left out: a reader
// takes an absent key as zeros (or as the table's initial values, for a
// program that declared some).
//
// # Reading
//
// ReadTable reads one table (Read the only one, as float32) part by part,
// telling text from binary by the manifest and checking the part's first
// bytes agree. Every length is bounded before use — a text line by 16 MiB
// and the table's width, a binary part's records by its size — and every
// malformed line or record is an error naming the file and the line or
// record. A fuzz target (FuzzDecodePart) feeds the part reader arbitrary
// bytes, whole and in two pieces.
package model

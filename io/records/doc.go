// Package records parses training records, libsvm or CSV lines, into
// Examples (a label, an instance weight where libsvm gives one, and
// sparse features sorted by key), reusing the Example's slices so that
// steady-state parsing does not allocate.
//
// # Usage
//
//	lr, err := split.Open(ctx, resolver, s, split.ReaderOptions{})
//	defer lr.Close()
//	rd, err := records.NewReader(lr, records.Options{Format: records.FormatLibSVM, MaxBadRecords: 100})
//	var ex records.Example
//	for {
//		err := rd.Next(&ex)
//		if err == io.EOF {
//			break
//		}
//		if err != nil {
//			return err // a *RecordError names the file, the line and the byte offset
//		}
//		use(ex.Label, ex.Keys, ex.Vals)
//	}
//
// Malformed records are errors that name the file's URI, the record's
// line (when the file was opened with split.Open and the record lies in
// its first split.MaxLineCount bytes) and its byte offset;
// Options.MaxBadRecords lets a job skip a bounded number of them
// (Reader.Bad counts them).
package records

// Package split cuts input files into splits and reads the lines of a
// split, so that workers can share a data set: the tracker plans the
// splits once (Plan) and hands them out; a worker reads each split it is
// given (Open) and, whatever the split size and wherever the HDFS block
// boundaries fall, every line of every file is read by exactly one split
// (Hadoop's LineRecordReader rule; see Open).
//
// # Usage
//
//	splits, err := split.Plan(ctx, resolver, []string{"hdfs:///logs/2026-11-*/*.libsvm"}, 64<<20)
//	...
//	lr, err := split.Open(ctx, resolver, splits[i], split.ReaderOptions{})
//	defer lr.Close()
//	for {
//		line, off, err := lr.Next()
//		if err == io.EOF {
//			break
//		}
//		...
//	}
//
// A LineReader returns slices of its read buffer: no allocation per line,
// and a line is valid only until the next call to Next. Lines longer than
// ReaderOptions.MaxLineLength are reported, with the file's URI and the
// line's byte offset, and skipped.
package split

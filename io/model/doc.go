// Package model is the format of the models Spindle jobs write, with its
// writer's helpers and a reader.
//
// A model is a directory (local or HDFS):
//
//	part-00000        one text file per server (its rank, five digits, as
//	part-00001        Hadoop numbers parts), lines "key<TAB>value[<TAB>value…]",
//	…                 keys in decimal, values as the shortest decimal that
//	                  reads back to the same float32; keys whose values are
//	                  all exactly zero may be left out
//	_manifest.json    the format name, the job and every part with its size
//	_SUCCESS          empty, written last: without it there is no model
//
// Parts are plain text so that Hadoop's own tools read them
// (hdfs dfs -text, -cat). Each part is written under a temporary name and
// renamed (WriteAtomic); Commit checks that every part is there before it
// writes the manifest and then _SUCCESS; Read refuses a directory without
// _SUCCESS and names the file and line of anything malformed.
package model

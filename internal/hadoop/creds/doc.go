// Package creds reads and writes Hadoop credentials ("token storage") files
// and the Hadoop Writable encodings they are built from, without a JVM.
//
// A YARN container finds its tokens in the file named by
// $HADOOP_TOKEN_FILE_LOCATION (the NodeManager writes it as container_tokens
// in the container's work directory); an ApplicationMaster picks the token of
// kind [KindAMRMToken] from it. The same bytes travel in
// ContainerLaunchContextProto.tokens.
//
// # Usage
//
//	c, err := creds.ReadFile(os.Getenv(creds.TokenFileEnv))
//	if err != nil { ... }
//	tok, ok := c.Find(creds.KindAMRMToken)
//
// [Read] accepts both on-disk versions (0, Writable, which every Hadoop
// version writes by default, and 1, protobuf); [Credentials.Write] writes
// version 0. Every length read from input is bounded by the Max* constants,
// and malformed input yields an error, never a panic.
package creds

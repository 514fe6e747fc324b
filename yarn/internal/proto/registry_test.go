package proto_test

import (
	"testing"

	_ "github.com/colinmarc/hdfs/v2" // registers Hadoop's own hadoop.common / hadoop.hdfs descriptors
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	hpb "github.com/spindle-ps/spindle/internal/hadoop/proto"
	pb "github.com/spindle-ps/spindle/yarn/internal/proto"
)

// TestNoRegistryConflict links colinmarc/hdfs next to these bindings (a
// conflict would panic at init, before this runs) and checks that both sets
// of descriptors are registered under distinct names.
func TestNoRegistryConflict(t *testing.T) {
	var theirs, ours int
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		switch fd.Package() {
		case "hadoop.common", "hadoop.hdfs":
			theirs++
		case "spindle.hadoop.common", "spindle.hadoop.yarn":
			ours++
		}
		return true
	})
	if theirs == 0 || ours != 3 {
		t.Fatalf("registered files: %d of colinmarc/hdfs's, %d of ours; want some and 3", theirs, ours)
	}
	for _, m := range []protoreflect.ProtoMessage{&hpb.RpcRequestHeaderProto{}, &hpb.DataTransferEncryptorMessageProto{}, &pb.ApplicationReportProto{}} {
		name := m.ProtoReflect().Descriptor().FullName()
		if _, err := protoregistry.GlobalTypes.FindMessageByName(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := protoregistry.GlobalTypes.FindMessageByName("hadoop.common.RpcRequestHeaderProto"); err != nil {
		t.Errorf("colinmarc/hdfs's RpcRequestHeaderProto not registered: %v", err)
	}
}

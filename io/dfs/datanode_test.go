package dfs_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ps/spindle/internal/hadoop/proto"
	"github.com/spindle-ps/spindle/internal/nettest"
	"github.com/spindle-ps/spindle/io/dfs"
)

// pbMsg builds a protobuf message field by field (the HDFS messages the
// client decodes are internal to it).
type pbMsg []byte

func (m pbMsg) uint(num protowire.Number, v uint64) pbMsg {
	m = protowire.AppendTag(m, num, protowire.VarintType)
	return protowire.AppendVarint(m, v)
}

func (m pbMsg) bytes(num protowire.Number, b []byte) pbMsg {
	m = protowire.AppendTag(m, num, protowire.BytesType)
	return protowire.AppendBytes(m, b)
}

func (m pbMsg) str(num protowire.Number, s string) pbMsg { return m.bytes(num, []byte(s)) }

// oneBlockNamenode serves, over Hadoop IPC with SIMPLE authentication,
// the NameNode calls the client makes to open and read a file of size
// bytes held in one block on the DataNode at datanode (host:port).
func oneBlockNamenode(t *testing.T, datanode string, size uint64) string {
	t.Helper()
	host, p, err := net.SplitHostPort(datanode)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	const isFile = 2
	status := pbMsg{}.uint(1, isFile).str(2, "").uint(3, size).bytes(4, pbMsg{}.uint(1, 0o644)).
		str(5, "u").str(6, "g").uint(7, 0).uint(8, 0).uint(10, 1).uint(11, 128<<20)
	dn := pbMsg{}.bytes(1, pbMsg{}.str(1, host).str(2, host).str(3, "dn-1").uint(4, uint64(port)).uint(5, 0).uint(6, 0))
	block := pbMsg{}.bytes(1, pbMsg{}.str(1, "pool").uint(2, 1).uint(3, 1).uint(4, size)).
		uint(2, 0).bytes(3, dn).uint(4, 0).
		bytes(5, pbMsg{}.bytes(1, nil).bytes(2, nil).str(3, "").str(4, ""))
	answers := map[string]pbMsg{
		"getFileInfo":       pbMsg{}.bytes(1, status),
		"getBlockLocations": pbMsg{}.bytes(1, pbMsg{}.uint(1, size).bytes(2, block).uint(3, 0).uint(5, 1)),
		"getServerDefaults": pbMsg{}.bytes(1, pbMsg{}.uint(1, 128<<20).uint(2, 512).uint(3, 64<<10).uint(4, 1).uint(5, 4096)),
	}

	return nettest.Serve(t, func(c net.Conn) {
		if err := serveIPC(c, answers); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
			t.Logf("fake NameNode: %v", err)
		}
	})
}

// serveIPC answers calls on c from answers, by method name, after the
// preamble and the connection context.
func serveIPC(c net.Conn, answers map[string]pbMsg) error {
	if _, err := io.ReadFull(c, make([]byte, 7)); err != nil {
		return err
	}
	for {
		var n uint32
		if err := binary.Read(c, binary.BigEndian, &n); err != nil {
			return err
		}
		frame := make([]byte, n)
		if _, err := io.ReadFull(c, frame); err != nil {
			return err
		}
		var parts [][]byte
		for len(frame) > 0 {
			m, k := protowire.ConsumeBytes(frame)
			if k < 0 {
				return protowire.ParseError(k)
			}
			parts, frame = append(parts, m), frame[k:]
		}
		rrh := &pb.RpcRequestHeaderProto{}
		if len(parts) < 2 {
			return fmt.Errorf("frame of %d parts", len(parts))
		}
		if err := proto.Unmarshal(parts[0], rrh); err != nil {
			return err
		}
		if rrh.GetCallId() < 0 {
			continue // the connection context
		}
		rh := &pb.RequestHeaderProto{}
		if err := proto.Unmarshal(parts[1], rh); err != nil {
			return err
		}
		h := &pb.RpcResponseHeaderProto{CallId: proto.Uint32(uint32(rrh.GetCallId())), Status: pb.RpcResponseHeaderProto_SUCCESS.Enum()}
		body, ok := answers[rh.GetMethodName()]
		if !ok {
			h.Status = pb.RpcResponseHeaderProto_ERROR.Enum()
			h.ExceptionClassName = proto.String("java.lang.UnsupportedOperationException")
			h.ErrorMsg = proto.String(rh.GetMethodName())
		}
		hb, err := proto.Marshal(h)
		if err != nil {
			return err
		}
		out := protowire.AppendBytes(nil, hb)
		if ok {
			out = protowire.AppendBytes(out, body)
		}
		if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(out))), out...)); err != nil {
			return err
		}
	}
}

// TestStalledDatanodeFailsTheRead: a file whose only DataNode accepts the
// connection and never answers the read request fails a Read without a
// context deadline, bounded by IOTimeout, rather than hanging it (the
// client applies a Read's deadline to a DataNode connection only once
// the DataNode has answered).
func TestStalledDatanodeFailsTheRead(t *testing.T) {
	t.Parallel()
	datanode := silentNamenode(t) // a listener that accepts and never answers
	nn := oneBlockNamenode(t, datanode, 100)
	h, err := dfs.NewHDFS(dfs.HDFSOptions{Authority: nn, Namenodes: []string{nn}, User: "u", IOTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	f, err := h.Open(context.Background(), "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if fi, _ := f.Stat(); fi.Size() != 100 {
		t.Fatalf("size %d, want 100", fi.Size())
	}
	errc := make(chan error, 1)
	go func() {
		_, err := f.Read(make([]byte, 10))
		errc <- err
	}()
	select {
	case err = <-errc:
	case <-time.After(time.Minute):
		h.Close()
		t.Fatal("a Read from a DataNode that never answers did not end")
	}
	if err == nil {
		t.Fatal("Read succeeded")
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), datanode) {
		t.Errorf("err = %v, want a timeout naming %s", err, datanode)
	}
	t.Log(err)
}

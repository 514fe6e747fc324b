package transport

import (
	"fmt"
	"math"
	"net"
	"strconv"
)

// Role is a node's role, numbered as ps-lite numbers PBNode.role.
type Role int32

// The roles.
const (
	RoleServer    Role = 0
	RoleWorker    Role = 1
	RoleScheduler Role = 2
)

func (r Role) String() string {
	switch r {
	case RoleServer:
		return "server"
	case RoleWorker:
		return "worker"
	case RoleScheduler:
		return "scheduler"
	}
	return "role(" + strconv.Itoa(int(r)) + ")"
}

// Node ids and groups, numbered as in ps-lite: the scheduler is 1, groups
// are the bitmask of 1 (scheduler), 2 (servers) and 4 (workers), server rank
// r is 8+2r and worker rank r is 9+2r.
const (
	SchedulerID int32 = 1
	ServerGroup int32 = 2
	WorkerGroup int32 = 4
	AllGroups   int32 = SchedulerID | ServerGroup | WorkerGroup
	// EmptyID marks a node that has no id yet (ps-lite's kEmpty).
	EmptyID int32 = math.MaxInt32
)

// ServerID returns the id of server rank r.
func ServerID(rank int) int32 { return int32(8 + 2*rank) }

// WorkerID returns the id of worker rank r.
func WorkerID(rank int) int32 { return int32(9 + 2*rank) }

// IDRank returns the rank of a server or worker id.
func IDRank(id int32) int {
	if id < 8 {
		return 0
	}
	return int(id-8) / 2
}

// IDRole returns the role of a node id, and false for a group id or an
// id no node can have.
func IDRole(id int32) (Role, bool) {
	switch {
	case id == SchedulerID:
		return RoleScheduler, true
	case id >= 8 && id != EmptyID && id%2 == 0:
		return RoleServer, true
	case id >= 9 && id != EmptyID:
		return RoleWorker, true
	}
	return 0, false
}

// IsGroup reports whether id names a group (1..7) rather than a node.
func IsGroup(id int32) bool { return id >= 1 && id <= 7 }

// Command is a control command, numbered as ps-lite's Control::Command where
// ps-lite has one.
type Command int32

// The control commands. Zero is a data message.
const (
	CmdNone      Command = 0
	CmdTerminate Command = 1 // reserved; Spindle never sends it on the wire
	CmdAddNode   Command = 2 // registration, and the node table from the scheduler
	CmdBarrier   Command = 3 // barrier request (to scheduler) and release (from it)
	CmdAck       Command = 4 // acknowledges the message whose signature it carries
	CmdHeartbeat Command = 5 // node → scheduler, and the scheduler's reply
	CmdNodeDead  Command = 6 // scheduler → nodes: the listed nodes are dead
	CmdRefused   Command = 7 // scheduler → node: registration refused, Reason says why
	CmdLeave     Command = 8 // node → scheduler after the final barrier, and the scheduler's acknowledgement
)

func (c Command) String() string {
	names := [...]string{"NONE", "TERMINATE", "ADD_NODE", "BARRIER", "ACK", "HEARTBEAT", "NODE_DEAD", "REFUSED", "LEAVE"}
	if c >= 0 && int(c) < len(names) {
		return names[c]
	}
	return "CMD(" + strconv.Itoa(int(c)) + ")"
}

// DataType names the element type of a data frame, numbered as ps-lite's.
type DataType int32

// The data types.
const (
	TypeChar DataType = iota
	TypeInt8
	TypeInt16
	TypeInt32
	TypeInt64
	TypeUint8
	TypeUint16
	TypeUint32
	TypeUint64
	TypeFloat32
	TypeFloat64
	TypeOther
)

// Size returns the width of one element in bytes, or 0 for TypeOther and
// unknown types.
func (t DataType) Size() int {
	switch t {
	case TypeChar, TypeInt8, TypeUint8:
		return 1
	case TypeInt16, TypeUint16:
		return 2
	case TypeInt32, TypeUint32, TypeFloat32:
		return 4
	case TypeInt64, TypeUint64, TypeFloat64:
		return 8
	}
	return 0
}

// Node describes one process of the job.
type Node struct {
	Role Role
	ID   int32
	Host string
	Port int32
	// Rank is the node's rank within its role; -1 when not yet known.
	Rank int32
	// IsRecovery marks a node that replaced a dead one and inherited its id.
	IsRecovery bool
	// Incarnation distinguishes successive processes that hold the same
	// id: it is chosen at random by each process when it starts.
	Incarnation int64
}

// Addr returns host:port.
func (n Node) Addr() string { return net.JoinHostPort(n.Host, strconv.Itoa(int(n.Port))) }

func (n Node) String() string {
	return fmt.Sprintf("%s %d (rank %d) at %s", n.Role, n.ID, n.Rank, n.Addr())
}

// Control is the control part of a message; Cmd is CmdNone for data.
type Control struct {
	Cmd          Command
	Nodes        []Node
	BarrierGroup int32
	// MsgSig is the signature an ACK acknowledges.
	MsgSig uint64
	// Auth is the proof that the sender knows the job secret (an HMAC).
	Auth []byte
	// Nonce makes each Auth unique.
	Nonce  int64
	Reason string
}

// Meta is the header of a message. Field meanings follow ps-lite's Meta;
// Sender and Recver are carried on the wire, unlike in ps-lite.
type Meta struct {
	Sender int32
	Recver int32
	// AppID and CustomerID select the customer (app) that receives the
	// message within the receiving node.
	AppID      int32
	CustomerID int32
	// Timestamp identifies a request within its customer; the response
	// carries the same value.
	Timestamp int32
	Request   bool
	Push      bool
	Pull      bool
	SimpleApp bool
	// Head and Body are the simple app's payload, or a KV command.
	Head     int32
	Body     []byte
	Priority int32
	// Status is nonzero in a response whose request failed; Body then
	// holds the error text.
	Status int32
	// MsgSig identifies a message for acknowledged delivery and duplicate
	// suppression. Zero means unsigned.
	MsgSig    uint64
	DataTypes []DataType
	Control   Control

	// Filters lists the communication filters a KV message went through
	// (a bit set that psnode defines), so that its receiver decodes the
	// data frames correctly; zero for plain messages.
	Filters int32
	// Acks, in an answer, are the timestamps of the receiver's earlier
	// requests (of the same customer) that it also answers, each as an
	// empty answer without error: a server's answers to pushes ride on
	// its next message to the worker. At most MaxAcks.
	Acks []int32
}

// Message is one psnode message: meta and zero or more raw data frames.
// Data frames are little-endian arrays whose element types are listed in
// Meta.DataTypes.
type Message struct {
	Meta Meta
	Data [][]byte

	// WireSize is set by Recv: the bytes the message took on the wire,
	// meta plus data frames (0 when the transport does not know). Send
	// ignores it.
	WireSize int

	lease *lease // the transport's buffers some of Data alias; see Lend
}

// DataBytes returns the total size of the data frames.
func (m *Message) DataBytes() int {
	n := 0
	for _, d := range m.Data {
		n += len(d)
	}
	return n
}

func (m *Message) String() string {
	c, acks := "", ""
	if m.Meta.Control.Cmd != CmdNone {
		c = " " + m.Meta.Control.Cmd.String()
	}
	if len(m.Meta.Acks) > 0 {
		acks = fmt.Sprintf(" acks=%v", m.Meta.Acks)
	}
	return fmt.Sprintf("msg %d→%d%s app=%d cust=%d ts=%d%s req=%v push=%v pull=%v head=%d frames=%d bytes=%d",
		m.Meta.Sender, m.Meta.Recver, c, m.Meta.AppID, m.Meta.CustomerID, m.Meta.Timestamp, acks,
		m.Meta.Request, m.Meta.Push, m.Meta.Pull, m.Meta.Head, len(m.Data), m.DataBytes())
}

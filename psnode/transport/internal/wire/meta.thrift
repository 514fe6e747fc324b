// Wire schema of the meta frame of a psnode message.
//
// A message is a ZeroMQ multipart [meta][data0]...[dataN]; meta is this
// struct encoded with Thrift's compact protocol. Field ids are part of the
// wire contract: never renumber, only add optional fields.

namespace go wire

struct Node {
  1: optional i32 role
  2: optional i32 id
  3: optional string host
  4: optional i32 port
  5: optional bool is_recovery
  6: optional i32 rank
  7: optional i64 incarnation
}

struct Control {
  1: optional i32 cmd
  2: optional list<Node> nodes
  3: optional i32 barrier_group
  4: optional i64 msg_sig
  5: optional binary auth
  6: optional i64 nonce
  7: optional string reason
}

struct Meta {
  1: optional i32 head
  2: optional binary body
  3: optional Control control
  4: optional bool request
  5: optional bool push
  6: optional bool simple_app
  7: optional i32 app_id
  8: optional i32 timestamp
  9: optional list<i32> data_type
  10: optional i32 customer_id
  12: optional bool pull
  13: optional i32 priority
  14: optional i32 sender
  15: optional i32 recver
  16: optional i64 msg_sig
  17: optional i32 status
  // The communication filters a KV message went through (psnode's filter
  // bits); numbered apart from the fields above so that fields added
  // in between keep their places.
  30: optional i32 filters
  // Timestamps of the receiver's earlier push requests that this answer
  // also answers, each as an empty answer without error.
  31: optional list<i32> acks
}

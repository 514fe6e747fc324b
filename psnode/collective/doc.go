// Package collective runs collective operations (AllReduce, Broadcast,
// Reduce, ReduceScatter, AllGather, Barrier) among a group of psnode
// nodes, over the node's own transport.
package collective

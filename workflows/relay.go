package workflows

// This file holds the delta relay: how the text deltas of a worker's model
// calls reach followers in other processes without a single event in any
// workflow's history. The worker serves its bus's deltas over HTTP and
// says where in its identity on the task queue; a follower that asks for
// deltas (WithDeltas) reads the identities of the queue's workers from
// Temporal and subscribes to each relay, for the run it follows. The
// package doc tells the whole story; this file is the mechanism.

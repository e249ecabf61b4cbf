// Package events records what a run's workflows do and hands it to
// followers: the events of each workflow (a Recorder), the text deltas of
// model calls (a Bus), and the live feed that serves both to followers in
// other processes and on other hosts. Following a run is the client's
// (package client); this package is the worker's side.
//
// The contract:
//
//  1. Every workflow of a run or session records its events with a
//     Recorder: numbered from 1 across its runs, kept in workflow state
//     (bounded by the workflow's continue-as-new bounds), and answered by
//     the troupe.EventsQuery query (troupe.EventsQueryPage at most an
//     answer, those after a number) so a follower's cursor stays good.
//  2. As a workflow continues as new, SavePage saves its run's events to
//     the blob store as one page (events/WORKFLOW/FIRST.json, under the
//     run's keys, so blob retention deletes them with the rest of the
//     run; the SaveEvents activity), and the next run carries the last
//     200 events, the numbering and the list of pages (Carry), which the
//     troupe.EventPagesQuery query returns.
//  3. A worker given a Bus (workflows.Config.Events) hands each event, as
//     it is recorded, to followers in its process (client.FollowLive), and
//     the model activity publishes each piece of a turn's text as a
//     troupe.EventTextDelta of the agent's workflow and turn, then a
//     troupe.EventTextEnd. Deltas never pass through workflow code,
//     workflow state, queries of the run's workflows or their history: no
//     history event, no workflow task, per turn or per piece.
//  4. Followers in other processes, on this host or another, get the
//     bus's events and deltas from the process's live feed (ServeFeed):
//     a workflow of the process's own (troupe.LiveWorkflowName, id and
//     task queue troupe-live/HOST/UUID) that completes at once, whose
//     troupe.LiveQuery query the process answers from its bus, holding a
//     request that finds nothing new for up to its wait (a long poll).
//     The worker advertises the feed in its identity on its task queue
//     (troupe.WithLiveFeed), where followers find it (troupe.LiveFeedOf).
//     Through the feed, an event of a workflow busy in a long workflow
//     task (an agent whose model and tool calls are local activities,
//     back to back) reaches a follower elsewhere as it is recorded, not
//     when the task ends.
//
// What it costs: the feed opens no port; it is a worker with two pollers
// on the feed's queue, and one workflow of 5 history events per process
// start (closed at once: it leaves nothing running when the process
// dies). A query writes no history event; each is a round trip through
// the server, which hands the poller the feed's 5 events to replay. Per
// run asked about, the feed keeps a watch: the last 4,096 events and
// deltas, which ends after a minute with no request; a follower further
// behind loses the oldest (troupe.LivePage.Lost), and publishing never
// waits, so no follower slows a model call. What the feed answers goes
// through the client's data converter, its codec included, and only who
// may query workflows of the namespace can read it. A model call that
// fails after some deltas is retried, and its retry streams its text
// again, after the model_retry event.
package events

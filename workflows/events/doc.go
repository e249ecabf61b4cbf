// Package events records what a run's workflows do and hands it to
// followers: the events of each workflow (a Recorder), the text deltas of
// model calls (a Bus), and the relay that serves those deltas to
// followers in other processes. Following a run is the client's
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
//     workflow state, queries or history: no history event, no workflow
//     task, no payload in Temporal, per turn or per piece.
//  4. Followers in other processes get the deltas from the worker's
//     relay: ServeDeltas serves them over HTTP (GET troupe.RelayPath
//     ?root=RUN, basic auth troupe.RelayUser and a random token, a line of
//     JSON per delta of the run's workflows, ids RUN and RUN/...) on the
//     worker's DeltaAddr (DefaultDeltaAddr: loopback, a free port), and
//     the worker advertises it in its identity on its task queue
//     (troupe.WithRelay), where followers find it (troupe.RelayOf).
//
// What it costs: a relay costs the worker a listening socket and, per
// subscriber (64 at most), a buffer of 1,024 deltas: publishing never
// waits, and a subscriber that falls behind loses deltas, never slows a
// model call. When a relay cannot be reached (another host behind a
// firewall, a relay bound to loopback, "off"), the follower gets no
// deltas and no error: it shows each turn when its model_turn event
// comes. A model call that fails after some deltas is retried, and its
// retry streams its text again, after the model_retry event. A relay
// bound beyond loopback serves in clear text: bind it only on a network
// you trust. Temporal carries only the relay's URL and token, inside the
// identity its workers present anyway, so only who may read the task
// queue or the histories can read a relay (the server of `troupe dev`
// asks no credentials: there, that is anyone who can reach it).
package events

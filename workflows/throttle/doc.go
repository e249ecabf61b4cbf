// Package throttle keeps the calls to a model endpoint (a base URL and a
// model name) within its limit (agents.ModelLimit: calls at once, calls
// started in any window) across every worker of a task queue, through
// worker crashes, for model calls run as local activities and as regular
// ones alike.
//
// The contract:
//
//  1. Shares. Each endpoint's limit is held by a limiter workflow
//     (LimiterWorkflow, id LimiterID(queue, endpoint)) on the task queue.
//     A worker that calls the endpoint holds a lease on a share of the
//     limit: so many calls at once, so many starts per window. It renews
//     the lease every RenewEvery by an update (update-with-start, so the
//     first worker starts the limiter), reporting what it enforces now,
//     its calls in flight, its recent starts and its demand (calls in
//     flight or waiting). The limiter answers with its share.
//  2. Never past the limit. The limiter counts against each worker what
//     that worker may use until its next renewal: the most of the share it
//     enforced, its calls in flight (or recent starts) and its new share.
//     A worker's new share is at most the limit less what the others may
//     use, so the shares in use never add up past the limit, even while
//     they move from a worker that has less to do to one that has more.
//     Shares follow demand (max-min fair) within a renewal or two.
//  3. Crashes. A lease lasts LeaseTTL from the renewal that took it, as
//     the worker's clock counts from before it sent the renewal. A worker
//     whose lease lapses (it could not renew) starts no call and cancels
//     those in flight; the limiter gives a lapsed share to others only
//     after LeaseTTL and one more window have passed since it last heard
//     of the worker, so a dead worker's calls have ended and left the
//     window by then. A worker that restarts is a new holder.
//  4. Windows. A worker counts a call as a start from the moment it lets
//     it through until a window after its answer began
//     (model.WithSendHook), plus a margin (a fiftieth of the window) for
//     clocks: the provider counted the request when it arrived, somewhere
//     in between, so however long a request takes to get there, no window
//     of the provider's sees more than the worker counted.
//  5. Waiting. A call waits for room in its worker's share, within the
//     bound its caller gives (Acquire's wait); past it, it fails with
//     ErrBusy, which the model activity turns into troupe.ModelRateLimited
//     so the agent workflow retries it later, as it does a 429.
//
// Without a Temporal client (a test environment, a Runner registered by
// hand) each process keeps the whole limit for itself (Standalone).
//
// The limiter's history grows by a few events per renewal; it continues
// as new after ContinueAfterRenewals of them, and ends after an hour in
// which no worker held a share.
package throttle

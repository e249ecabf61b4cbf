package client_test

import (
	"context"
	"fmt"
	"log"

	temporalclient "go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe/client"
)

// A Client over a Temporal client: runs start on the default queue, the
// one `troupe dev` and `troupe run` serve. NewLazyClient dials on first
// use, so nothing here needs a server.
func ExampleNew() {
	tc, err := temporalclient.NewLazyClient(temporalclient.Options{HostPort: "127.0.0.1:7233"})
	if err != nil {
		log.Fatal(err)
	}
	defer tc.Close()
	c, err := client.New(client.Config{Temporal: tc})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.TaskQueue())
	fmt.Println(c.Run("troupe-dealdesk-1a2b3c4d").ID())
	// Output:
	// troupe
	// troupe-dealdesk-1a2b3c4d
}

// Start a run, show its events as they happen, and print its output. It
// needs a Temporal server and a worker serving the graph (`troupe dev`).
func ExampleClient_Start() {
	tc, err := temporalclient.Dial(temporalclient.Options{HostPort: "127.0.0.1:7233"})
	if err != nil {
		log.Fatal(err)
	}
	defer tc.Close()
	c, err := client.New(client.Config{Temporal: tc})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	run, err := c.Start(ctx, client.RunInput{Graph: "dealdesk", Input: "Review the Acme renewal at 35% off."})
	if err != nil {
		log.Fatal(err)
	}
	fctx, stop := context.WithCancel(ctx)
	followed := make(chan error, 1)
	go func() {
		followed <- run.Follow(fctx, func(e client.Event) { fmt.Println(e.Kind, e.Agent) })
	}()
	res, err := run.Result(ctx)
	stop()
	<-followed
	if err != nil {
		log.Fatalf("run %s: %v", run.ID(), err)
	}
	fmt.Printf("%s answered: %s\n", res.Agent, res.Output)
}

// Follow a run from a cursor kept with Cursor.Add: given the same cursor
// later, or in another process (it encodes as JSON), FollowFrom goes on
// where this one stopped, with no event repeated or skipped. It needs a
// Temporal server and a worker.
func ExampleRun_FollowFrom() {
	tc, err := temporalclient.Dial(temporalclient.Options{HostPort: "127.0.0.1:7233"})
	if err != nil {
		log.Fatal(err)
	}
	defer tc.Close()
	c, err := client.New(client.Config{Temporal: tc})
	if err != nil {
		log.Fatal(err)
	}
	run := c.Run("troupe-dealdesk-1a2b3c4d")
	cursor := client.Cursor{}
	show := func(e client.Event) {
		cursor.Add(e)
		fmt.Println(e.Kind, e.Agent)
	}
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		_, _ = run.Result(context.Background())
		stop()
	}()
	if err := run.FollowFrom(ctx, cursor, show); err != nil {
		log.Fatal(err)
	}
}

// Raise the budget of a session whose budget is spent, so that it takes
// messages again, and say what it spent. It needs a Temporal server and
// a worker.
func ExampleSession_SetBudget() {
	tc, err := temporalclient.Dial(temporalclient.Options{HostPort: "127.0.0.1:7233"})
	if err != nil {
		log.Fatal(err)
	}
	defer tc.Close()
	c, err := client.New(client.Config{Temporal: tc})
	if err != nil {
		log.Fatal(err)
	}
	info, err := c.Session("session-dealdesk-1a2b3c4d").SetBudget(context.Background(), "cost=1,model_calls=100")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("budget %s: spent %v in %d model calls\n", info.Budget.Budget, info.Budget.Cost, info.Budget.Calls)
}

package bench

import (
	"bytes"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/troupe-dev/troupe/codec"
)

// BenchmarkCodecOverhead measures what sealing every payload (package
// codec, AES-256-GCM) costs a turn. The looper (200 turns calling a no-op
// tool, then an answer) runs on two workers of the same server: one whose
// client carries no keys, and one whose client (and so worker) seals with
// a key, started by a client with that key. Each is measured twice per
// iteration, in the order plain, sealed, sealed, plain, so that a drift in
// the machine's load weighs on both alike.
//
// Reported: plain-ms/turn and sealed-ms/turn (wall time on the server),
// ratio (sealed over plain; the goal is 1.1 or less), and cpu-ratio (the
// process's CPU per turn, sealed over plain, which other load disturbs
// less).
func BenchmarkCodecOverhead(b *testing.B) {
	c := temporalClient(b)
	sc := sealedClient(b)
	srv, url := modelServer(b)
	plainQ := startWorker(b, c, troupeWorker(b, url, nil))
	sealedQ := startWorker(b, sc, troupeWorker(b, url, nil))
	warmUp(b, c, plainQ, false)
	warmUp(b, sc, sealedQ, false)

	var plain, sealed loopStats
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plain.add(runLoop(b, c, srv, plainQ))
		sealed.add(runLoop(b, sc, srv, sealedQ))
		sealed.add(runLoop(b, sc, srv, sealedQ))
		plain.add(runLoop(b, c, srv, plainQ))
	}
	b.StopTimer()
	b.ReportMetric(plain.wallPer(), "plain-ms/turn")
	b.ReportMetric(sealed.wallPer(), "sealed-ms/turn")
	b.ReportMetric(sealed.wallPer()/plain.wallPer(), "ratio")
	b.ReportMetric(sealed.cpuPer()/plain.cpuPer(), "cpu-ratio")
	b.Logf("plain: %.2f ms/turn (CPU %.2f ms); sealed: %.2f ms/turn (CPU %.2f ms); ratio %.3f, CPU ratio %.3f",
		plain.wallPer(), plain.cpuPer(), sealed.wallPer(), sealed.cpuPer(), sealed.wallPer()/plain.wallPer(), sealed.cpuPer()/plain.cpuPer())
}

// sealedClient is a client of the bench server whose payloads are sealed
// with a key of its own.
func sealedClient(b *testing.B) client.Client {
	b.Helper()
	temporalClient(b)
	cdc, err := codec.New([]codec.Key{{ID: "bench", Secret: bytes.Repeat([]byte{7}, codec.KeySize)}}, "")
	if err != nil {
		b.Fatal(err)
	}
	opts := client.Options{HostPort: server.FrontendAddress(), Logger: quiet()}
	cdc.Apply(&opts)
	c, err := client.Dial(opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

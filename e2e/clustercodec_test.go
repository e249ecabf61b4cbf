package e2e

// The cluster's payload codec, seen from outside: what the server keeps
// in PostgreSQL, what a client with the cluster's key reads, and what the
// codec server decodes for the Web UI.

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/troupe-dev/troupe"
	"github.com/troupe-dev/troupe/codec"
)

// clusterPGPort is the port of the cluster's PostgreSQL
// (scripts/cluster.sh's PG_PORT).
const clusterPGPort = "17432"

// clusterSealed checks that the canary in the prompt of run id is sealed
// on the cluster: the run's input is a sealed payload, and the canary is
// in no raw event of its history, nor in the server's databases (a
// pg_dump of temporal and temporal_visibility, searched for the canary
// in plain text and as bytea hex), where the type of a child workflow the
// run started, which is not a payload, is found; decoded with the
// cluster's key, by a client and by the codec server the Web UI is
// configured with, the input holds the canary.
func clusterSealed(t *testing.T, r *clusterRig, id, canary string) {
	t.Helper()
	ctx := context.Background()
	var input *commonpb.Payloads
	var raw bytes.Buffer
	child := ""
	it := r.c.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := proto.Marshal(ev)
		raw.Write(b)
		if a := ev.GetWorkflowExecutionStartedEventAttributes(); a != nil {
			input = a.GetInput()
		}
		if a := ev.GetStartChildWorkflowExecutionInitiatedEventAttributes(); a != nil && child == "" {
			child = a.GetWorkflowType().GetName()
		}
	}
	if len(input.GetPayloads()) == 0 || !codec.Sealed(input.GetPayloads()[0]) {
		t.Fatalf("the input of run %s is not sealed: %v", id, input)
	}
	if bytes.Contains(raw.Bytes(), []byte(canary)) {
		t.Errorf("the canary %s is in plain text in the raw history of %s", canary, id)
	}
	if child == "" {
		t.Fatalf("run %s started no child workflow", id)
	}

	// The server's databases, as PostgreSQL holds them.
	var dump []byte
	for _, db := range []string{"temporal", "temporal_visibility"} {
		out, err := exec.Command("runuser", "-u", "postgres", "--", "pg_dump", "-h", filepath.Join(r.state, "pg", "run"),
			"-p", clusterPGPort, "--data-only", db).Output()
		if err != nil {
			t.Fatalf("pg_dump %s: %v", db, err)
		}
		dump = append(dump, out...)
	}
	hexOf := func(s string) []byte { return []byte(hex.EncodeToString([]byte(s))) }
	if !bytes.Contains(dump, hexOf(child)) {
		t.Fatalf("the workflow type %s is not in the database dump (%d bytes) as hex: the search cannot see into its blobs", child, len(dump))
	}
	if bytes.Contains(dump, []byte(canary)) || bytes.Contains(dump, hexOf(canary)) {
		t.Errorf("the canary %s is in plain text in the server's PostgreSQL databases", canary)
	}

	// A client with the key reads it.
	decode := func(ps *commonpb.Payloads) string {
		var in troupe.RunInput
		if err := converter.GetDefaultDataConverter().FromPayloads(ps, &in); err != nil {
			t.Fatalf("decoded input: %v", err)
		}
		return in.Input
	}
	opened, err := r.codec.Decode(input.GetPayloads())
	if err != nil {
		t.Fatalf("decode with the cluster's key: %v", err)
	}
	if got := decode(&commonpb.Payloads{Payloads: opened}); !strings.Contains(got, canary) {
		t.Errorf("the input decoded with the cluster's key is %q, want the canary %s", got, canary)
	}

	// The Web UI decodes through the codec server, which answers its
	// pages' origin.
	ui, codecs := r.env["TROUPE_CLUSTER_UI"], r.env["TROUPE_CLUSTER_CODEC"]
	resp, err := http.Get(ui + "/api/v1/settings")
	if err != nil {
		t.Fatal(err)
	}
	var settings struct{ Codec struct{ Endpoint string } }
	err = json.NewDecoder(resp.Body).Decode(&settings)
	resp.Body.Close()
	if err != nil || settings.Codec.Endpoint == "" || settings.Codec.Endpoint != codecs {
		t.Errorf("the Web UI's codec endpoint is %q (%v), want %q", settings.Codec.Endpoint, err, codecs)
	}
	body, _ := protojson.Marshal(input)
	req, _ := http.NewRequest(http.MethodPost, codecs+"/decode", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Namespace", r.env["TEMPORAL_NAMESPACE"])
	req.Header.Set("Origin", ui)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the codec server's decode for the Web UI: %s %s", resp.Status, answer)
	}
	var decoded commonpb.Payloads
	if err := protojson.Unmarshal(answer, &decoded); err != nil {
		t.Fatal(err)
	}
	if got := decode(&decoded); !strings.Contains(got, canary) {
		t.Errorf("the codec server decoded the input as %q, want the canary %s", got, canary)
	}
}

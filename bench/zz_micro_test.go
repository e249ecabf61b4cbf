package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/troupe-dev/troupe/agents"
	"github.com/troupe-dev/troupe/runtime"
	"github.com/troupe-dev/troupe/runtime/blob"
)

func BenchmarkZPut(b *testing.B) {
	for _, q := range []string{"", "&metadata=skip"} {
		b.Run("q="+q, func(b *testing.B) {
			s, err := blob.Open(context.Background(), "file://"+b.TempDir()+"?no_tmp_dir=true"+q)
			if err != nil {
				b.Fatal(err)
			}
			data := []byte(`[{"type":"function_call_output","call_id":"abc","output":"ok 12","agent":"looper"},{"type":"function_call","call_id":"def","name":"noop","arguments":"{\"turn\":\"13\"}","agent":"looper"}]`)
			for i := 0; b.Loop(); i++ {
				if err := s.Put(context.Background(), fmt.Sprintf("transcripts/x/%06d.json", i), data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkZLoad(b *testing.B) {
	for _, n := range []int{10, 100, 200, 1000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s, _ := blob.Open(context.Background(), "mem://")
			ref := runtime.TranscriptRef{Key: "t"}
			for i := 0; i < n; i++ {
				ref, _ = runtime.Append(context.Background(), s, ref, []agents.Item{agents.FunctionCallOutput("call_abcdefgh", "ok 12"), agents.FunctionCall("call_abcdefgi", "noop", `{"turn":"13"}`)})
			}
			for b.Loop() {
				if _, err := runtime.Load(context.Background(), s, ref); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

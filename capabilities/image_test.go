package capabilities

import (
	"reflect"
	"testing"

	"github.com/troupe-dev/troupe/agents"
)

func TestExpandImages(t *testing.T) {
	img := string(must(ImageOutput{Text: "Image a.png", ImageURL: "data:image/png;base64,AAAA"}.MarshalJSON()))
	bare := string(must(ImageOutput{ImageURL: "data:image/gif;base64,R0lG"}.MarshalJSON()))
	tests := []struct {
		name string
		in   []agents.Item
		want []agents.Item // nil: the input itself
	}{
		{name: "no outputs", in: []agents.Item{agents.UserMessage(img)}},
		{name: "plain outputs", in: []agents.Item{agents.FunctionCallOutput("c", `{"type":"image","image_url":"data:x"}`)}},
		{name: "a broken image output", in: []agents.Item{agents.FunctionCallOutput("c", `{"type":"troupe.image_output","image_url":`)}},
		{name: "an image output without a URL", in: []agents.Item{agents.FunctionCallOutput("c", `{"type":"troupe.image_output","text":"x"}`)}},
		{
			name: "image outputs among others",
			in: []agents.Item{
				agents.FunctionCallOutput("a", "text"),
				agents.FunctionCallOutput("b", img),
				agents.FunctionCallOutput("c", bare),
			},
			want: []agents.Item{
				agents.FunctionCallOutput("a", "text"),
				{Type: agents.ItemFunctionCallOutput, CallID: "b", Output: "Image a.png", Images: []string{"data:image/png;base64,AAAA"}},
				{Type: agents.ItemFunctionCallOutput, CallID: "c", Images: []string{"data:image/gif;base64,R0lG"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]agents.Item(nil), tt.in...)
			got := ExpandImages(in)
			if !reflect.DeepEqual(in, tt.in) {
				t.Fatal("ExpandImages modified its input")
			}
			if tt.want == nil {
				if &got[0] != &in[0] {
					t.Errorf("ExpandImages copied an input with no images")
				}
				return
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ExpandImages:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

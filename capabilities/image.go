// This file is how a tool result carries an image. Function tools return
// text, and a tool output travels through Temporal as text (offloaded to
// the blob store when large), so view_image returns an ImageOutput, which
// NewFunctionTool marshals to a tagged JSON document. Just before a model
// call, ExpandImages turns such outputs into agents.Item.Images, which the
// model adapters send as image parts.

package capabilities

import (
	"encoding/json"
	"strings"

	"github.com/troupe-dev/troupe/agents"
)

// imageOutputType tags an ImageOutput's JSON; imageOutputPrefix is how
// every such document starts, so that outputs that are not one are told
// apart without parsing them.
const (
	imageOutputType   = "troupe.image_output"
	imageOutputPrefix = `{"type":"` + imageOutputType + `"`
)

// ImageOutput is a tool result that shows the model an image. A function
// tool returns it as its Result; its JSON form is tagged so that
// ExpandImages recognises it in a function call output.
type ImageOutput struct {
	// Text goes with the image (for example which file it is); it may be
	// empty.
	Text string
	// ImageURL is a data URL ("data:image/png;base64,...").
	ImageURL string
}

type imageOutputJSON struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ImageURL string `json:"image_url"`
}

// MarshalJSON writes {"type":"troupe.image_output","text":...,"image_url":...}.
func (o ImageOutput) MarshalJSON() ([]byte, error) {
	return json.Marshal(imageOutputJSON{Type: imageOutputType, Text: o.Text, ImageURL: o.ImageURL})
}

// ParseImageOutput reports whether a function call output is an
// ImageOutput's JSON, and returns it.
func ParseImageOutput(output string) (ImageOutput, bool) {
	if !strings.HasPrefix(output, imageOutputPrefix) {
		return ImageOutput{}, false
	}
	var j imageOutputJSON
	if err := json.Unmarshal([]byte(output), &j); err != nil || j.Type != imageOutputType || j.ImageURL == "" {
		return ImageOutput{}, false
	}
	return ImageOutput{Text: j.Text, ImageURL: j.ImageURL}, true
}

// ExpandImages returns items with every function call output that holds
// an ImageOutput turned into its text (Output) and image (Images). Call it
// on a model request's input, after trimming and after outputs stored by
// reference are resolved: the images then reach the model without ever
// travelling through a Temporal payload. items is not modified; when no
// output holds an image, it is returned as is.
func ExpandImages(items []agents.Item) []agents.Item {
	var out []agents.Item
	for i, it := range items {
		if it.Type != agents.ItemFunctionCallOutput {
			continue
		}
		img, ok := ParseImageOutput(it.Output)
		if !ok {
			continue
		}
		if out == nil {
			out = append([]agents.Item(nil), items...)
		}
		it.Output = img.Text
		it.Images = append(append([]string(nil), it.Images...), img.ImageURL)
		out[i] = it
	}
	if out == nil {
		return items
	}
	return out
}

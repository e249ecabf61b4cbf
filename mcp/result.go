package mcp

import (
	"encoding/json"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Result is the outcome of a tool call.
type Result struct {
	// Text is what the model sees: the text contents joined with "\n".
	// Embedded resources, resource links and audio appear as short
	// descriptions (an embedded text resource with its text). When the
	// result has no text but structured content, Text is its JSON.
	Text string
	// Structured is the result's structuredContent, if any.
	Structured json.RawMessage
	// Images are the result's image contents, in order.
	Images []Image
	// IsError reports that the tool itself reported an error (isError:
	// true); Text holds its message. It is an answer for the model, not a
	// failure of the call.
	IsError bool
	// Version is the server's listing version when the call ended; when it
	// differs from the Listing.Version the caller used, the tools may have
	// changed.
	Version int64
}

// Image is an image a tool returned.
type Image struct {
	// MIMEType is the image's type, for example "image/png".
	MIMEType string
	// Data is the decoded image.
	Data []byte
}

// newResult turns an SDK result into a Result.
func newResult(res *sdk.CallToolResult) (*Result, error) {
	r := &Result{IsError: res.IsError}
	var text []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			text = append(text, c.Text)
		case *sdk.ImageContent:
			r.Images = append(r.Images, Image{MIMEType: c.MIMEType, Data: c.Data})
		case *sdk.AudioContent:
			text = append(text, fmt.Sprintf("[audio %s, %s]", orUnknown(c.MIMEType), size(len(c.Data))))
		case *sdk.ResourceLink:
			text = append(text, describeLink(c))
		case *sdk.EmbeddedResource:
			text = append(text, describeResource(c.Resource))
		default:
			text = append(text, fmt.Sprintf("[content of type %T]", c))
		}
	}
	if res.StructuredContent != nil {
		b, err := marshalJSON(res.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("structured content: %w", err)
		}
		r.Structured = b
	}
	r.Text = strings.Join(text, "\n")
	if len(text) == 0 && r.Structured != nil {
		r.Text = string(r.Structured)
	}
	if r.IsError && r.Text == "" {
		r.Text = "the tool reported an error without a message"
	}
	return r, nil
}

func describeLink(l *sdk.ResourceLink) string {
	var b strings.Builder
	b.WriteString("[resource link")
	if name := firstNonEmpty(l.Title, l.Name); name != "" {
		fmt.Fprintf(&b, " %q", name)
	}
	fmt.Fprintf(&b, ": %s", l.URI)
	if l.MIMEType != "" {
		fmt.Fprintf(&b, " (%s)", l.MIMEType)
	}
	if l.Description != "" {
		fmt.Fprintf(&b, " - %s", l.Description)
	}
	b.WriteString("]")
	return b.String()
}

func describeResource(r *sdk.ResourceContents) string {
	if r == nil {
		return "[empty resource]"
	}
	if r.Blob != nil {
		return fmt.Sprintf("[resource %s (%s), %s of binary data]", r.URI, orUnknown(r.MIMEType), size(len(r.Blob)))
	}
	head := fmt.Sprintf("[resource %s", r.URI)
	if r.MIMEType != "" {
		head += fmt.Sprintf(" (%s)", r.MIMEType)
	}
	return head + "]\n" + r.Text
}

func size(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}

func orUnknown(mime string) string {
	if mime == "" {
		return "unknown type"
	}
	return mime
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

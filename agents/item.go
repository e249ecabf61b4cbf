package agents

// ItemType names a kind of conversation Item.
type ItemType string

// The kinds of conversation items a transcript holds. They map one to one
// onto the OpenAI Responses API input items.
const (
	// ItemMessage is a message from the user, the assistant, or the system.
	ItemMessage ItemType = "message"
	// ItemFunctionCall is a tool call requested by the model.
	ItemFunctionCall ItemType = "function_call"
	// ItemFunctionCallOutput is the result of a tool call, sent back to the model.
	ItemFunctionCallOutput ItemType = "function_call_output"
	// ItemReasoning is an opaque reasoning item returned by reasoning models;
	// it is passed back unchanged.
	ItemReasoning ItemType = "reasoning"
)

// Roles of message items.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleSystem    = "system"
	RoleDeveloper = "developer"
)

// Item is one entry of a conversation transcript. Only the fields that
// belong to its Type are set.
type Item struct {
	// Type says which of the fields below are meaningful.
	Type ItemType `json:"type"`
	// Role is the author of a message item.
	Role string `json:"role,omitempty"`
	// Content is the text of a message item.
	Content string `json:"content,omitempty"`
	// ContentRef, when set, names a blob that holds Content instead: a
	// user's message too big for a Temporal payload travels by reference
	// (troupe.MessageRef) and is read back only in activities.
	ContentRef string `json:"content_ref,omitempty"`
	// ID is the provider's item id, kept for reasoning items and messages
	// that must be passed back verbatim.
	ID string `json:"id,omitempty"`
	// CallID ties a function call to its output.
	CallID string `json:"call_id,omitempty"`
	// Name is the tool name of a function call.
	Name string `json:"name,omitempty"`
	// Arguments is the JSON text of a function call's arguments.
	Arguments string `json:"arguments,omitempty"`
	// Output is the text of a function call output.
	Output string `json:"output,omitempty"`
	// OutputRef, when set, names a blob that holds the output instead of
	// Output; large tool outputs travel by reference so that no Temporal
	// payload grows with them.
	OutputRef string `json:"output_ref,omitempty"`
	// Images are data URLs ("data:image/png;base64,...") of images that a
	// function call output shows the model along with Output. The model
	// adapters send them as image parts of the output (Responses) or of a
	// user message right after the tool messages (Chat Completions, whose
	// tool messages hold text only). They are set on a model request's
	// input just before the call (capabilities.ExpandImages) and, unlike
	// Output, never offloaded, so they stay out of Temporal payloads.
	Images []string `json:"images,omitempty"`
	// Summary is the text summary of a reasoning item.
	Summary string `json:"summary,omitempty"`
	// EncryptedContent is the opaque payload of a reasoning item.
	EncryptedContent string `json:"encrypted_content,omitempty"`
	// Agent is the name of the agent whose turn produced the item.
	Agent string `json:"agent,omitempty"`
}

// UserMessage returns a user message item with the given text.
func UserMessage(text string) Item {
	return Item{Type: ItemMessage, Role: RoleUser, Content: text}
}

// UserMessageRef returns a user message item whose text is the blob at
// key (ContentRef).
func UserMessageRef(key string) Item {
	return Item{Type: ItemMessage, Role: RoleUser, ContentRef: key}
}

// AssistantMessage returns an assistant message item with the given text.
func AssistantMessage(text string) Item {
	return Item{Type: ItemMessage, Role: RoleAssistant, Content: text}
}

// FunctionCall returns a function call item.
func FunctionCall(callID, name, arguments string) Item {
	return Item{Type: ItemFunctionCall, CallID: callID, Name: name, Arguments: arguments}
}

// FunctionCallOutput returns the output item for a function call.
func FunctionCallOutput(callID, output string) Item {
	return Item{Type: ItemFunctionCallOutput, CallID: callID, Output: output}
}

// PairCalls drops the function calls whose output is not among items and
// the outputs whose call is not, so that no item is an orphan (which the
// model API would reject). Items are not modified; the result is a new
// slice.
func PairCalls(items []Item) []Item {
	paired := Paired(items)
	out := make([]Item, 0, len(items))
	for _, it := range items {
		if paired(it) {
			out = append(out, it)
		}
	}
	return out
}

// Paired returns the test PairCalls keeps items by: false for a function
// call whose output is not among items and for an output whose call is
// not, true for every other item.
func Paired(items []Item) func(Item) bool {
	calls, outputs := map[string]bool{}, map[string]bool{}
	for _, it := range items {
		switch it.Type {
		case ItemFunctionCall:
			calls[it.CallID] = true
		case ItemFunctionCallOutput:
			outputs[it.CallID] = true
		}
	}
	return func(it Item) bool {
		switch it.Type {
		case ItemFunctionCall:
			return outputs[it.CallID]
		case ItemFunctionCallOutput:
			return calls[it.CallID]
		}
		return true
	}
}

package troupe

// ControlSignal carries a Control to an agent workflow: a session passes
// its pause, resume and interrupt down the agent tree of its running turn,
// each agent workflow to the agent workflows it runs.
const ControlSignal = "troupe.control"

// Controls (Control.Op).
const (
	ControlPause     = "pause"
	ControlResume    = "resume"
	ControlInterrupt = "interrupt"
)

// Control is a command for the agent tree of a session's turn. Seq
// numbers a session's pauses and resumes: signals may arrive out of
// order, and an agent ignores one older than the last it took.
type Control struct {
	Op  string `json:"op"`
	Seq int    `json:"seq,omitempty"`
}

package codereview

// This file holds write_report, the coordinator's one side effect: the
// Markdown report and the JSON findings, written on the worker's host into
// the run's output directory and nowhere else.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/troupe-dev/troupe/agents"
)

// The files write_report writes in the output directory.
const (
	ReportFile   = "codereview-report.md"
	FindingsFile = "codereview-findings.json"
)

// ErrInvalidFindings reports findings_json that is not a JSON array of
// Finding.
var ErrInvalidFindings = errors.New("codereview: invalid findings")

// ReportArgs are write_report's arguments.
type ReportArgs struct {
	// Markdown is the whole report.
	Markdown string `json:"markdown" jsonschema_description:"The review report in Markdown: one section per reviewer, each finding with its file, line and severity."`
	// FindingsJSON is every reviewer's findings, merged.
	FindingsJSON string `json:"findings_json" jsonschema_description:"All findings of all reviewers as a JSON array of objects {file, line, severity, message}; severity is info, low, medium or high."`
}

// Report is what write_report wrote.
type Report struct {
	// ReportPath and FindingsPath are the absolute paths of the files.
	ReportPath   string `json:"report_path"`
	FindingsPath string `json:"findings_path"`
	// Counts are the findings by severity.
	Counts Counts `json:"counts"`
	// Reviewed names the commits reviewed (Change.Reviewed), e.g.
	// "abc1234..def5678 (2 commits)"; the report says it under its title.
	Reviewed string `json:"reviewed,omitempty"`
}

// ParseFindings decodes findings_json: a JSON array of Finding with known
// fields only, a valid severity and a line that is not negative.
func ParseFindings(doc string) ([]Finding, error) {
	if !strings.HasPrefix(strings.TrimSpace(doc), "[") {
		return nil, fmt.Errorf("%w: want a JSON array of findings", ErrInvalidFindings)
	}
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.DisallowUnknownFields()
	var fs []Finding
	if err := dec.Decode(&fs); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidFindings, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: text after the JSON array", ErrInvalidFindings)
	}
	var errs []error
	for i, f := range fs {
		if !validSeverity(f.Severity) {
			errs = append(errs, fmt.Errorf("finding %d: severity %q is not one of info, low, medium, high", i, f.Severity))
		}
		if f.Line < 0 {
			errs = append(errs, fmt.Errorf("finding %d: line %d is negative", i, f.Line))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidFindings, err)
	}
	if fs == nil {
		fs = []Finding{}
	}
	return fs, nil
}

// WriteReport writes ReportFile and FindingsFile into dir (created if
// missing; relative to the working directory when relative). The files
// are opened through an os.Root on dir, so a symlink planted in dir that
// leads outside it is refused, not followed.
func WriteReport(dir, markdown string, findings []Finding) (Report, error) {
	if dir == "" {
		dir = "."
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Report{}, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return Report{}, fmt.Errorf("codereview: output directory: %w", err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return Report{}, fmt.Errorf("codereview: output directory: %w", err)
	}
	defer root.Close()
	if findings == nil {
		findings = []Finding{}
	}
	var js bytes.Buffer
	enc := json.NewEncoder(&js)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(findings); err != nil {
		return Report{}, err
	}
	if !strings.HasSuffix(markdown, "\n") {
		markdown += "\n"
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{ReportFile, []byte(markdown)}, {FindingsFile, js.Bytes()}} {
		if err := writeIn(root, f.name, f.data); err != nil {
			return Report{}, fmt.Errorf("codereview: write %s in %s: %w", f.name, abs, err)
		}
	}
	return Report{
		ReportPath:   filepath.Join(abs, ReportFile),
		FindingsPath: filepath.Join(abs, FindingsFile),
		Counts:       CountFindings(findings),
	}, nil
}

func writeIn(root *os.Root, name string, data []byte) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// CountFindings counts findings by severity.
func CountFindings(fs []Finding) Counts {
	var c Counts
	for _, f := range fs {
		switch f.Severity {
		case SeverityInfo:
			c.Info++
		case SeverityLow:
			c.Low++
		case SeverityMedium:
			c.Medium++
		case SeverityHigh:
			c.High++
		}
	}
	return c
}

func validSeverity(s string) bool {
	switch s {
	case SeverityInfo, SeverityLow, SeverityMedium, SeverityHigh:
		return true
	}
	return false
}

// writeReport is the write_report tool: it validates the findings and
// writes both files into the run's "out" directory, the report saying
// which commits were reviewed (when the run names its repository).
func writeReport(ctx context.Context, args ReportArgs) (Report, error) {
	fs, err := ParseFindings(args.FindingsJSON)
	if err != nil {
		return Report{}, err
	}
	out, reviewed := ".", ""
	if rc, ok := agents.RunContextFrom(ctx); ok {
		if rc.Vars[VarOut] != "" {
			out = rc.Vars[VarOut]
		}
		if rc.Vars[VarRepo] != "" {
			_, ch, err := runChange(ctx, rc)
			if err != nil {
				return Report{}, err
			}
			reviewed = ch.Reviewed()
		}
	}
	markdown := args.Markdown
	if reviewed != "" {
		markdown = withReviewed(markdown, reviewed)
	}
	rep, err := WriteReport(out, markdown, fs)
	rep.Reviewed = reviewed
	return rep, err
}

// withReviewed says under the report's title (its first line, when that
// is a heading) which commits were reviewed.
func withReviewed(markdown, reviewed string) string {
	line := "Reviewed " + reviewed + "."
	if title, rest, ok := strings.Cut(markdown, "\n"); ok && strings.HasPrefix(title, "#") {
		return title + "\n\n" + line + "\n" + rest
	}
	return line + "\n\n" + markdown
}

// WriteReportTool is the coordinator's write_report tool. It runs as an
// activity on a worker, so "out" is a directory of that worker's host.
var WriteReportTool = agents.MustFunctionTool("write_report",
	"Writes the review: the Markdown report as "+ReportFile+" and the findings as "+FindingsFile+
		" in the run's output directory. Returns the paths written, the counts of findings by severity and the commits reviewed.",
	writeReport, agents.AsActivity())

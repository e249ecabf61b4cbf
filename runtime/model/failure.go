package model

import (
	"errors"
	"fmt"
	"net/url"
)

// ErrorMessage says what went wrong with a model call, for the failure a
// caller reports: where the model could not be reached and why (an
// APIError with no answer over a *url.Error: "model unreachable at URL
// (connection refused)"), or what it answered.
func ErrorMessage(err error) string {
	var ue *url.Error
	var ae *APIError
	if errors.As(err, &ae) && ae.StatusCode == 0 && errors.As(err, &ue) {
		return fmt.Sprintf("model unreachable at %s (%s)", ue.URL, Innermost(err))
	}
	return err.Error()
}

// Innermost is the message of the innermost error of err's chain (the
// first branch of a joined error): what went wrong, without the layers
// that carried it.
func Innermost(err error) string {
	for {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			if errs := u.Unwrap(); len(errs) > 0 {
				next = errs[0]
			}
		}
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

package blob

import (
	"errors"
	"fmt"
	"testing"
)

// s3Error is an S3 API error as the AWS SDK reports it: a code, and a
// text with the request's ids.
type s3Error struct{ code, text string }

func (e s3Error) Error() string     { return e.text }
func (e s3Error) ErrorCode() string { return e.code }

func TestLostCreate(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"none", nil, false},
		{"a 412", fmt.Errorf("put: %w", s3Error{"PreconditionFailed", "StatusCode: 412, RequestID: ABC"}), true},
		// gocloud's s3blob reads "301" anywhere in the text as a missing
		// bucket; a 412 whose host id holds it is a lost create all the same.
		{"a 412 with 301 in its ids", fmt.Errorf("put: %w", s3Error{"PreconditionFailed", "StatusCode: 412, HostID: jwrJ3301Tg4="}), true},
		{"another error", fmt.Errorf("put: %w", s3Error{"AccessDenied", "StatusCode: 403"}), false},
		{"not an API error", errors.New("connection refused"), false},
	} {
		if got := lostCreate(tc.err); got != tc.want {
			t.Errorf("%s: lostCreate = %v, want %v", tc.name, got, tc.want)
		}
	}
}

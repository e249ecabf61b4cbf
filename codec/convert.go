package codec

// The codec on a Temporal client: its data converter, and a failure
// converter that seals error messages and stack traces as well.

import (
	"errors"

	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// Apply puts c on the options of a Temporal client: the data converter
// (o's own, or the SDK's default) through c, and a failure converter over
// it, which seals failures' messages and stack traces when c has a key
// and, for a failure it cannot open, says why in its message. Workers
// made from the client take both. A nil c changes nothing.
func (c *Codec) Apply(o *client.Options) {
	if c == nil {
		return
	}
	parent := o.DataConverter
	if parent == nil {
		parent = converter.GetDefaultDataConverter()
	}
	o.DataConverter = converter.NewCodecDataConverter(parent, c)
	o.FailureConverter = c.failureConverter(o.DataConverter)
}

// DataConverter returns the SDK's default data converter through c, for
// code that decodes payloads by hand (a history's events, a memo).
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

func (c *Codec) failureConverter(dc converter.DataConverter) converter.FailureConverter {
	return failureConverter{
		FailureConverter: temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
			DataConverter:          dc,
			EncodeCommonAttributes: c.active != "",
		}),
		plain: temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{DataConverter: dc}),
		dc:    dc,
	}
}

// failureConverter is the SDK's, but that a failure whose sealed message
// does not open says why (a *KeyError's message) where the SDK's would
// say "Encoded failure" and no more.
//
// A failure caused by a *KeyError is left unsealed: its message holds
// key ids and no payload, and it must reach the processes that lack the
// key this one seals with (a worker with the wrong key fails the runs it
// cannot read, and their clients hear why). It is an application error of
// type ErrorType that is not retried, unless it is one already: the
// SDK decodes an activity's input before any interceptor sees it, and an
// activity whose input its worker cannot open would otherwise be retried
// by the same worker for as long as its retry policy lets it (for ever,
// by default), with nothing said.
type failureConverter struct {
	converter.FailureConverter
	plain converter.FailureConverter
	dc    converter.DataConverter
}

// ErrorType is the type of the application error a *KeyError becomes when
// it crosses Temporal (troupe.ErrPayloadKey).
const ErrorType = "troupe.PayloadKey"

func (f failureConverter) ErrorToFailure(err error) *failurepb.Failure {
	var ke *KeyError
	if !errors.As(err, &ke) {
		return f.FailureConverter.ErrorToFailure(err)
	}
	var ae *temporal.ApplicationError
	if !errors.As(err, &ae) {
		err = temporal.NewNonRetryableApplicationError(err.Error(), ErrorType, nil)
	}
	return f.plain.ErrorToFailure(err)
}

func (f failureConverter) FailureToError(fl *failurepb.Failure) error {
	if f.unopened(fl) {
		// Not the caller's to change: mark a copy.
		fl = proto.Clone(fl).(*failurepb.Failure)
		for at := fl; at != nil; at = at.GetCause() {
			if err := f.open(at); err != nil {
				at.Message = at.GetMessage() + " (" + err.Error() + ")"
			}
		}
	}
	return f.FailureConverter.FailureToError(fl)
}

// unopened reports whether a failure of fl's chain has sealed attributes
// that do not open.
func (f failureConverter) unopened(fl *failurepb.Failure) bool {
	for at := fl; at != nil; at = at.GetCause() {
		if f.open(at) != nil {
			return true
		}
	}
	return false
}

// open is the error of opening fl's sealed attributes, if it has any.
func (f failureConverter) open(fl *failurepb.Failure) error {
	if fl.GetEncodedAttributes() == nil {
		return nil
	}
	var attrs struct {
		Message string `json:"message"`
	}
	return f.dc.FromPayload(fl.GetEncodedAttributes(), &attrs)
}

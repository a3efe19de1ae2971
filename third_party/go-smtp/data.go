package smtp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

type EnhancedCode [3]int

// SMTPError specifies the error code, enhanced error code (if any) and
// message returned by the server.
type SMTPError struct {
	Code         int
	EnhancedCode EnhancedCode
	Message      string
}

// NoEnhancedCode is used to indicate that enhanced error code should not be
// included in response.
//
// Note that RFC 2034 requires an enhanced code to be included in all 2xx, 4xx
// and 5xx responses. This constant is exported for use by extensions, you
// should probably use EnhancedCodeNotSet instead.
var NoEnhancedCode = EnhancedCode{-1, -1, -1}

// EnhancedCodeNotSet is a nil value of EnhancedCode field in SMTPError, used
// to indicate that backend failed to provide enhanced status code. X.0.0 will
// be used (X is derived from error code).
var EnhancedCodeNotSet = EnhancedCode{0, 0, 0}

func (err *SMTPError) Error() string {
	s := fmt.Sprintf("SMTP error %03d", err.Code)
	if err.Message != "" {
		s += ": " + err.Message
	}
	return s
}

func (err *SMTPError) Temporary() bool {
	return err.Code/100 == 4
}

var ErrDataTooLarge = &SMTPError{
	Code:         552,
	EnhancedCode: EnhancedCode{5, 3, 4},
	Message:      "Maximum message size exceeded",
}

type dataReader struct {
	r     *bufio.Reader
	state int

	limited bool
	n       int64 // Maximum bytes remaining

	// err is the error reading the stream met before the end of data
	// (a timeout, a reset, io.ErrUnexpectedEOF, ErrTooLongLine): after
	// it, where the data ends in the stream is unknown.
	err error
}

func newDataReader(c *Conn) *dataReader {
	dr := &dataReader{
		r: c.text.R,
	}

	if c.server.MaxMessageBytes > 0 {
		dr.limited = true
		dr.n = int64(c.server.MaxMessageBytes)
	}

	return dr
}

func (r *dataReader) Read(b []byte) (n int, err error) {
	if r.limited {
		if r.n <= 0 {
			// At the limit only the end of data may follow: a message of
			// exactly MaxMessageBytes (what SIZE advertises) is accepted.
			var one [1]byte
			if n, err = r.read(one[:]); n == 0 {
				return 0, err
			}
			return 0, ErrDataTooLarge
		}
		if int64(len(b)) > r.n {
			b = b[0:r.n]
		}
	}
	n, err = r.read(b)
	if r.limited {
		r.n -= int64(n)
	}
	return n, err
}

// read runs the bytes of b through the end-of-data state machine.
func (r *dataReader) read(b []byte) (n int, err error) {

	// Code below is taken from net/textproto with only one modification to
	// not rewrite CRLF -> LF.

	// Run data through a simple state machine to
	// elide leading dots and detect End-of-Data (<CR><LF>.<CR><LF>) line.
	const (
		stateBeginLine = iota // beginning of line; initial state; must be zero
		stateDot              // read . at beginning of line
		stateDotCR            // read .\r at beginning of line
		stateCR               // read \r (possibly at end of line)
		stateData             // reading data in middle of line
		stateEOF              // reached .\r\n end marker line
	)
	for n < len(b) && r.state != stateEOF {
		// In the middle of a line every byte but \r is data and leaves
		// the state as it is: copy what is buffered up to the next \r at
		// once rather than a byte at a time (patch 5). Only what is
		// buffered already: a read from the connection stays ReadByte's.
		if r.state == stateData {
			if k := r.r.Buffered(); k > 0 {
				if k > len(b)-n {
					k = len(b) - n
				}
				buf, _ := r.r.Peek(k)
				i := bytes.IndexByte(buf, '\r')
				if i < 0 {
					i = len(buf)
				}
				if i > 0 {
					n += copy(b[n:], buf[:i])
					r.r.Discard(i)
					continue
				}
			}
		}
		var c byte
		c, err = r.r.ReadByte()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			r.err = err
			break
		}
		switch r.state {
		case stateBeginLine:
			if c == '.' {
				r.state = stateDot
				continue
			}
			if c == '\r' {
				r.state = stateCR
				break
			}
			r.state = stateData
		case stateDot:
			if c == '\r' {
				r.state = stateDotCR
				continue
			}
			r.state = stateData
		case stateDotCR:
			if c == '\n' {
				r.state = stateEOF
				continue
			}
			// Not part of .\r\n: the dot stays elided, the saved \r is
			// emitted, and c is read again in the middle of a line, where
			// a \r may start the line ending.
			r.r.UnreadByte()
			c = '\r'
			r.state = stateData
		case stateCR:
			if c == '\n' {
				r.state = stateBeginLine
				break
			}
			if c == '\r' {
				// \r\r: the second \r may still start the line ending.
				break
			}
			r.state = stateData
		case stateData:
			if c == '\r' {
				r.state = stateCR
			}
		}
		b[n] = c
		n++
	}
	if err == nil && r.state == stateEOF {
		err = io.EOF
	}
	return
}

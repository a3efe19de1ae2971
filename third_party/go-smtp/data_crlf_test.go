package smtp

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
)

// referenceData is what the DATA reader must do, written plainly: the data
// ends at the first <CRLF>.<CRLF> (a "." line at the very start counts, as
// the DATA command's own CRLF precedes it), and a "." that starts a line
// (after <CRLF>) is removed. Bare CR and bare LF end no line. It returns the
// message and how many input bytes the terminator consumes; ok is false
// when the input has no terminator.
func referenceData(in string) (msg string, consumed int, ok bool) {
	i := strings.Index("\r\n"+in, "\r\n.\r\n")
	if i < 0 {
		return "", 0, false
	}
	body := in[:i] // i is where the terminator's "." is in in
	var b strings.Builder
	for k := 0; k < len(body); k++ {
		if body[k] == '.' && (k == 0 || (k >= 2 && body[k-2:k] == "\r\n")) {
			continue
		}
		b.WriteByte(body[k])
	}
	return b.String(), i + 3, true
}

// readData runs the DATA reader over in, reading size bytes at a time, and
// returns the message, the bytes left unread after it, and the error that
// ended it.
func readData(in string, size int) (msg, rest string, err error) {
	br := bufio.NewReader(strings.NewReader(in))
	r := &dataReader{r: br}
	var out bytes.Buffer
	buf := make([]byte, size)
	for {
		n, rerr := r.Read(buf)
		out.Write(buf[:n])
		if rerr != nil {
			err = rerr
			break
		}
	}
	left, _ := io.ReadAll(br)
	return out.String(), string(left), err
}

// TestDataReaderEndsAtCRLFDotCRLF: <CRLF>.<CRLF> ends the data whatever
// bytes come before it, and nothing else does: the bytes after it are left
// for the next command.
func TestDataReaderEndsAtCRLFDotCRLF(t *testing.T) {
	const next = "MAIL FROM:<next@example.org>\r\n"
	tests := []struct {
		name, in, want string
	}{
		{"plain", "a\r\n.\r\n", "a\r\n"},
		{"empty", ".\r\n", ""},
		{"last line ends in a bare CR", "a\r\n\r\r\n.\r\n", "a\r\n\r\r\n"},
		{"several bare CRs", "a\r\r\r\n.\r\n", "a\r\r\r\n"},
		{"bare CR after a stuffed dot", "a\r\n.\r\r\n.\r\n", "a\r\n\r\r\n"},
		{"stuffed dot then CR then text", "a\r\n.\rb\r\n.\r\n", "a\r\n\rb\r\n"},
		{"dot stuffing", "..\r\na\r\n..b\r\n.\r\n", ".\r\na\r\n.b\r\n"},
		// The SMTP smuggling separators end nothing: they are message text.
		{"LF.LF", "a\n.\nb\r\n.\r\n", "a\n.\nb\r\n"},
		{"CRLF.LF", "a\r\n.\nb\r\n.\r\n", "a\r\n\nb\r\n"},
		{"LF.CRLF", "a\n.\r\nb\r\n.\r\n", "a\n.\r\nb\r\n"},
		{"CR.CRLF", "a\r.\r\nb\r\n.\r\n", "a\r.\r\nb\r\n"},
	}
	for _, tc := range tests {
		for _, size := range []int{1, 3, 4096} {
			msg, rest, err := readData(tc.in+next, size)
			if err != io.EOF {
				t.Errorf("%s (reads of %d): err = %v, want io.EOF", tc.name, size, err)
			}
			if msg != tc.want {
				t.Errorf("%s (reads of %d): message = %q, want %q", tc.name, size, msg, tc.want)
			}
			if rest != next {
				t.Errorf("%s (reads of %d): left %q for the next command, want %q", tc.name, size, rest, next)
			}
		}
	}
}

// TestDataReaderExhaustive compares the reader with referenceData on every
// string of up to 8 bytes over the bytes that matter, followed by a
// terminator, so every input ends somewhere.
func TestDataReaderExhaustive(t *testing.T) {
	alphabet := []byte{'\r', '\n', '.', 'a'}
	var walk func(prefix []byte)
	walk = func(prefix []byte) {
		in := string(prefix) + "\r\n.\r\nNEXT"
		want, consumed, _ := referenceData(in)
		for _, size := range []int{1, 4096} {
			msg, rest, err := readData(in, size)
			if err != io.EOF || msg != want || rest != in[consumed:] {
				t.Fatalf("input %q (reads of %d): message %q, rest %q, err %v; want %q, %q, io.EOF",
					in, size, msg, rest, err, want, in[consumed:])
			}
		}
		if len(prefix) == 8 {
			return
		}
		for _, c := range alphabet {
			walk(append(prefix, c))
		}
	}
	walk(nil)
}

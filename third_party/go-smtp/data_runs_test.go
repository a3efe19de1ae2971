package smtp

import (
	"bufio"
	"bytes"
	"io"
	"math/rand"
	"strings"
	"testing"
	"testing/iotest"
)

// TestDataReaderRuns holds patch 5's copy of a run of data bytes to
// referenceData where TestDataReaderExhaustive cannot reach: long lines
// and runs that the reader's buffer splits (a 16-byte buffer filled by
// reads of one or half of what is asked), and reads of every size.
func TestDataReaderRuns(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	pieces := []string{"\r", "\n", ".", "\r\n", "\r\n.", "abc", "a long run of plain data bytes", "x"}
	for i := 0; i < 3000; i++ {
		var b strings.Builder
		for n := rng.Intn(24); n > 0; n-- {
			b.WriteString(pieces[rng.Intn(len(pieces))])
		}
		in := b.String() + "\r\n.\r\nNEXT"
		want, consumed, _ := referenceData(in)
		for _, src := range []func(io.Reader) io.Reader{iotest.OneByteReader, iotest.HalfReader, func(r io.Reader) io.Reader { return r }} {
			for _, size := range []int{1, 3, 7, 4096} {
				br := bufio.NewReaderSize(src(strings.NewReader(in)), 16)
				r := &dataReader{r: br}
				var out bytes.Buffer
				buf := make([]byte, size)
				var err error
				for err == nil {
					var n int
					n, err = r.Read(buf)
					out.Write(buf[:n])
				}
				left, _ := io.ReadAll(br)
				if err != io.EOF || out.String() != want || string(left) != in[consumed:] {
					t.Fatalf("input %q (reads of %d): message %q, rest %q, err %v; want %q, %q, io.EOF",
						in, size, out.String(), left, err, want, in[consumed:])
				}
			}
		}
	}
}

// BenchmarkDataReader reads a 2 KiB message of 70-byte lines.
func BenchmarkDataReader(b *testing.B) {
	in := strings.Repeat(strings.Repeat("x", 68)+"\r\n", 30) + ".\r\n"
	buf := make([]byte, 4096)
	b.SetBytes(int64(len(in)))
	for i := 0; i < b.N; i++ {
		r := &dataReader{r: bufio.NewReader(strings.NewReader(in))}
		for {
			if _, err := r.Read(buf); err != nil {
				break
			}
		}
	}
}

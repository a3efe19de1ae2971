package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mayfly/mayfly/bench/internal/load"
)

// target is one vegeta target (its JSON format).
type target struct {
	Method string              `json:"method"`
	URL    string              `json:"url"`
	Body   []byte              `json:"body,omitempty"` // base64 in JSON, as vegeta wants
	Header map[string][]string `json:"header,omitempty"`
}

func (b *bench) writeTargets(name string, ts []target) (string, error) {
	path := filepath.Join(b.logs, name+".targets.json")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, t := range ts {
		if err := enc.Encode(t); err != nil {
			f.Close()
			return "", err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// readTargets are targets that all read url as a different client IP each
// (from 198.18.0.0/15, starting at ipBase), with cookie.
func readTargets(url, cookie string, ipBase, n int) []target {
	ts := make([]target, n)
	for i := range ts {
		ts[i] = target{Method: "GET", URL: url, Header: map[string][]string{
			"Cookie": {cookie}, "X-Forwarded-For": {load.ClientIP(ipBase, i)},
		}}
	}
	return ts
}

type attack struct {
	name     string
	targets  string
	rate     int // requests/s; 0: as fast as workers allow
	workers  int
	duration time.Duration // 0: until the (lazy) targets run out
}

// vegetaReport is the part of `vegeta report -type=json` we read.
type vegetaReport struct {
	Latencies struct {
		P50  float64 `json:"50th"`
		P99  float64 `json:"99th"`
		Max  float64 `json:"max"`
		Mean float64 `json:"mean"`
	} `json:"latencies"`
	Duration    float64        `json:"duration"`
	Wait        float64        `json:"wait"`
	Requests    int            `json:"requests"`
	Throughput  float64        `json:"throughput"`
	StatusCodes map[string]int `json:"status_codes"`
	Errors      []string       `json:"errors"`
}

// vegetaResult is one line of `vegeta encode -to=json`.
type vegetaResult struct {
	Code      int       `json:"code"`
	Timestamp time.Time `json:"timestamp"`
	Latency   int64     `json:"latency"`
	Error     string    `json:"error"`
	Body      string    `json:"body"` // base64
}

// vegeta runs an attack and returns its report, the per-request results
// when raw is set, and the path of the binary results.
func (b *bench) vegeta(ctx context.Context, a attack, raw bool) (vegetaReport, []vegetaResult, error) {
	out := filepath.Join(b.logs, a.name+".bin")
	args := []string{"attack", "-format=json", "-targets=" + a.targets, "-output=" + out,
		"-rate=" + strconv.Itoa(a.rate), "-timeout=10s", "-keepalive=true"}
	if a.workers > 0 {
		args = append(args, "-workers="+strconv.Itoa(a.workers), "-max-workers="+strconv.Itoa(a.workers))
	}
	if !raw {
		// Only the status and an error envelope are read from these results:
		// keeping whole bodies made vegeta encode and write B's 50 KiB per
		// request to its results file, the largest cost on the machine.
		args = append(args, "-max-body=4096")
	}
	if a.duration > 0 {
		args = append(args, "-duration="+a.duration.String())
	} else {
		args = append(args, "-lazy")
	}
	var rep vegetaReport
	if _, err := b.runTool(ctx, "vegeta", b.tool("vegeta"), args, nil); err != nil {
		return rep, nil, err
	}
	js, err := b.runTool(ctx, "vegeta", b.tool("vegeta"), []string{"report", "-type=json", out}, nil)
	if err != nil {
		return rep, nil, err
	}
	if err := json.Unmarshal(js, &rep); err != nil {
		return rep, nil, fmt.Errorf("vegeta report: %w", err)
	}
	var results []vegetaResult
	if raw {
		enc, err := b.runTool(ctx, "vegeta", b.tool("vegeta"), []string{"encode", "-to=json", out}, nil)
		if err != nil {
			return rep, nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(enc))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var r vegetaResult
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				return rep, nil, fmt.Errorf("vegeta encode: %w", err)
			}
			results = append(results, r)
		}
	}
	os.Remove(out)
	return rep, results, nil
}

// errorCode is the "code" of an error envelope in a vegeta result body.
func (r vegetaResult) errorCode() string {
	body, _ := base64.StdEncoding.DecodeString(r.Body)
	var e struct{ Error struct{ Code string } }
	json.Unmarshal(body, &e)
	return e.Error.Code
}

// httpFigures turns a vegeta report into a run's figures: successful req/s,
// p50/p99 in ms and errors (every answer but want).
func httpFigures(rep vegetaReport, want int) (rps, p50, p99 float64, errs int, first string) {
	ok := rep.StatusCodes[strconv.Itoa(want)]
	errs = rep.Requests - ok
	if len(rep.Errors) > 0 {
		first = rep.Errors[0]
	} else if errs > 0 {
		first = fmt.Sprintf("status codes %v", rep.StatusCodes)
	}
	secs := (rep.Duration + rep.Wait) / 1e9
	if secs > 0 {
		rps = float64(ok) / secs
	}
	return rps, rep.Latencies.P50 / 1e6, rep.Latencies.P99 / 1e6, errs, first
}

// loadResult runs a tool of ours that prints one load.Result JSON line.
func (b *bench) loadResult(ctx context.Context, name string, args []string) (load.Result, error) {
	var r load.Result
	out, err := b.runTool(ctx, name, b.tool(name), args, nil)
	if err != nil {
		return r, err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		return r, fmt.Errorf("%s printed %q: %w", name, out, err)
	}
	return r, nil
}

// The bench's Go peer: a simple cron firing one-shot Kafka messages, the floor that
// schedulerstream's Kafka-target runs are measured against (bench/bench_kafka_target.py).
//
// It reads jobs, one a line, tab-separated: id, due time (unix ms), target topic, payload;
// keeps them in a timer heap; at each due time produces one record (key = id, value =
// payload, header due-ms) with acks=all, idempotent, no transactions. It prints one JSON line
// when loaded and connected ({"event":"ready",...}) and one when every record is acknowledged
// ({"event":"done",...}), each with the CPU seconds it has used so far (getrusage).
//
// With -state-topic it fires exactly once, like for like with schedulerstream's emission: each
// round of due jobs is one transaction holding their records and, per job, a "fired" record
// (key = id, value = due ms) on the state topic, which a restarted peer would read back so as
// not to fire a job twice. The transaction commits as soon as its records are acknowledged.
//
//	go build -o /tmp/peer . && /tmp/peer -brokers 127.0.0.1:39292 -jobs jobs.tsv [-state-topic t]
package main

import (
	"bufio"
	"container/heap"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type job struct {
	id      string
	dueMs   int64
	topic   string
	payload []byte
}

// dueHeap orders jobs by due time, earliest first.
type dueHeap []job

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].dueMs < h[j].dueMs }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(job)) }
func (h *dueHeap) Pop() any {
	old := *h
	last := old[len(old)-1]
	*h = old[:len(old)-1]
	return last
}

func load(r io.Reader) (dueHeap, error) {
	var jobs dueHeap
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; scanner.Scan(); line++ {
		text := scanner.Text()
		if text == "" {
			continue
		}
		fields := strings.SplitN(text, "\t", 4)
		if len(fields) != 4 {
			return nil, fmt.Errorf("line %d: want id, due_ms, topic, payload (tab-separated)", line)
		}
		due, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: due_ms: %w", line, err)
		}
		jobs = append(jobs, job{fields[0], due, fields[2], []byte(fields[3])})
	}
	heap.Init(&jobs)
	return jobs, scanner.Err()
}

func cpuSeconds() float64 {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return -1
	}
	return float64(usage.Utime.Nano()+usage.Stime.Nano()) / 1e9
}

func say(fields map[string]any) {
	fields["cpu_s"] = cpuSeconds()
	fields["at_ms"] = time.Now().UnixMilli()
	line, _ := json.Marshal(fields)
	fmt.Println(string(line))
}

// commit flushes the open transaction and commits it; any failure ends the peer (a bench run
// with a lost round would measure nothing).
func commit(ctx context.Context, client *kgo.Client) {
	if err := client.Flush(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "flush:", err)
		os.Exit(1)
	}
	if err := client.EndTransaction(ctx, kgo.TryCommit); err != nil {
		fmt.Fprintln(os.Stderr, "commit:", err)
		os.Exit(1)
	}
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "comma-separated bootstrap servers")
	path := flag.String("jobs", "-", "the jobs file ('-': stdin)")
	stateTopic := flag.String("state-topic", "", "fire in transactions, recording each job here")
	flag.Parse()

	input := io.Reader(os.Stdin)
	if *path != "-" {
		file, err := os.Open(*path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		defer file.Close()
		input = file
	}
	jobs, err := load(input)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	options := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(*brokers, ",")...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	}
	transactional := *stateTopic != ""
	if transactional {
		options = append(options, kgo.TransactionalID(fmt.Sprintf("bench-peer-%d", os.Getpid())))
	}
	client, err := kgo.NewClient(options...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer client.Close()
	ctx := context.Background()
	if err := client.Ping(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "broker:", err)
		os.Exit(2)
	}
	total := len(jobs)
	say(map[string]any{"event": "ready", "jobs": total})

	var failed atomic.Int64
	var firstError sync.Once
	var maxLagMs int64
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.Add(1)
			firstError.Do(func() { fmt.Fprintln(os.Stderr, "produce:", err) })
		}
	}
	timer := time.NewTimer(0)
	<-timer.C
	for jobs.Len() > 0 {
		if wait := time.Until(time.UnixMilli(jobs[0].dueMs)); wait > 0 {
			timer.Reset(wait)
			<-timer.C
		}
		now := time.Now().UnixMilli()
		if transactional {
			if err := client.BeginTransaction(); err != nil {
				fmt.Fprintln(os.Stderr, "begin:", err)
				os.Exit(1)
			}
		}
		for jobs.Len() > 0 && jobs[0].dueMs <= now {
			next := heap.Pop(&jobs).(job)
			maxLagMs = max(maxLagMs, now-next.dueMs)
			due := []byte(strconv.FormatInt(next.dueMs, 10))
			client.Produce(ctx, &kgo.Record{
				Topic:   next.topic,
				Key:     []byte(next.id),
				Value:   next.payload,
				Headers: []kgo.RecordHeader{{Key: "due-ms", Value: due}},
			}, done)
			if transactional {
				client.Produce(ctx, &kgo.Record{Topic: *stateTopic, Key: []byte(next.id), Value: due}, done)
			}
		}
		if transactional {
			commit(ctx, client)
		}
	}
	if err := client.Flush(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "flush:", err)
	}
	say(map[string]any{"event": "done", "jobs": total, "failed": failed.Load(), "max_fire_lag_ms": maxLagMs})
}

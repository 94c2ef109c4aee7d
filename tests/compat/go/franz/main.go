// Command franz is the franz-go driver of the client compatibility matrix
// (tests/compat/README.md): franz-go's kgo client for produce and consume, its kadm package
// for the admin commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"silt/compat/internal/compat"
)

func main() {
	compat.Main(map[string]compat.Command{
		"codecs":   {Args: 0, Run: codecs},
		"create":   {Args: 2, Run: create},
		"produce":  {Args: 3, Run: produce},
		"consume":  {Args: 4, Run: consume},
		"describe": {Args: 1, Run: describe},
		"alter":    {Args: 3, Run: alter},
		"delete":   {Args: 1, Run: deleteTopic},
		"list":     {Args: 0, Run: list},
		"acls":     {Args: 2, Run: acls},
	})
}

var codecOpts = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

func client(bootstrap string, opts ...kgo.Opt) (*kgo.Client, error) {
	base := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.ClientID("silt-compat-franz")}
	sec, err := securityOpts(compat.Security)
	if err != nil {
		return nil, err
	}
	base = append(base, sec...)
	if compat.Debug {
		base = append(base, kgo.WithLogger(kgo.BasicLogger(compat.DebugOut(), kgo.LogLevelDebug, nil)))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	return cl, nil
}

// admin is a kadm client; its metadata cache is kept short so that the waits of create and
// delete see each change promptly.
func admin(bootstrap string) (*kadm.Client, func(), error) {
	cl, err := client(bootstrap, kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return nil, nil, err
	}
	return kadm.NewClient(cl), cl.Close, nil
}

// withMessage adds the broker's error message to err, unless it only repeats the code's
// description.
func withMessage(err error, msg string) error {
	var ke *kerr.Error
	if errors.As(err, &ke) && ke.Description == msg {
		return err
	}
	if msg != "" {
		return fmt.Errorf("%w (%s)", err, msg)
	}
	return err
}

func codecs(string, []string) (any, error) {
	return map[string]any{"codecs": compat.Codecs}, nil
}

func create(bootstrap string, args []string) (any, error) {
	topic := args[0]
	n, err := compat.Int("PARTITIONS", args[1])
	if err != nil {
		return nil, err
	}
	adm, done, err := admin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), compat.Timeout)
	defer cancel()
	resps, err := adm.CreateTopics(ctx, int32(n), 1, nil, topic)
	if err != nil {
		return nil, fmt.Errorf("create topics: %w", err)
	}
	r, ok := resps[topic]
	if !ok {
		return nil, fmt.Errorf("create topics: no result for %s", topic)
	}
	if r.Err != nil {
		return nil, fmt.Errorf("create topics: %w", withMessage(r.Err, r.ErrMessage))
	}
	// Wait until the metadata shows every partition with a leader.
	for {
		tds, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("metadata of %s: %w", topic, err)
		}
		if td, ok := tds[topic]; ok && td.Err == nil && len(td.Partitions) == n {
			ready := true
			for _, p := range td.Partitions {
				if p.Err != nil || p.Leader < 0 {
					ready = false
				}
			}
			if ready {
				return map[string]any{}, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s has no leader for all %d partitions after %v", topic, n, compat.Timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func produce(bootstrap string, args []string) (any, error) {
	topic, codec := args[0], args[1]
	count, err := compat.Int("COUNT", args[2])
	if err != nil {
		return nil, err
	}
	c, ok := codecOpts[codec]
	if !ok {
		return nil, fmt.Errorf("unknown codec %q", codec)
	}
	// The default partitioner hashes the key (murmur2, as the Java client does).
	cl, err := client(bootstrap,
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(c),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordDeliveryTimeout(compat.Timeout))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), compat.Timeout)
	defer cancel()

	var (
		mu       sync.Mutex
		firstErr error
		acked    int
	)
	promise := func(r *kgo.Record, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("produce %s: %w", string(r.Key), err)
			}
			return
		}
		acked++
	}
	for i := 0; i < count; i++ {
		key, value, headers := compat.Record(codec, i)
		r := &kgo.Record{Key: []byte(key), Value: []byte(value)}
		for _, h := range headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
		}
		cl.Produce(ctx, r, promise)
	}
	flushErr := cl.Flush(ctx)
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return nil, firstErr
	}
	if flushErr != nil {
		return nil, fmt.Errorf("%d of %d records not acknowledged after %v: %w", count-acked, count, compat.Timeout, flushErr)
	}
	if acked != count {
		return nil, fmt.Errorf("%d of %d records acknowledged", acked, count)
	}
	return map[string]any{"acked": acked}, nil
}

func isContextErr(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

func consume(bootstrap string, args []string) (any, error) {
	topic, group := args[0], args[1]
	want, err := compat.Int("MAX", args[2])
	if err != nil {
		return nil, err
	}
	idleMs, err := compat.Int("IDLE_MS", args[3])
	if err != nil {
		return nil, err
	}
	idle := compat.NewIdle(idleMs)
	cl, err := client(bootstrap,
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			idle.Assigned()
		}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()

	// The last record printed, per partition: what is committed.
	last := map[int32]*kgo.Record{}
	n := 0
	var pollErr error
	for n < want && pollErr == nil && !idle.Over() {
		pctx, pcancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fetches := cl.PollRecords(pctx, want-n)
		pcancel()
		if fetches.IsClientClosed() {
			pollErr = errors.New("client closed while polling")
			break
		}
		fetches.EachError(func(t string, p int32, err error) {
			if pollErr == nil && !isContextErr(err) {
				pollErr = fmt.Errorf("fetch %s[%d]: %w", t, p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			hs := make([][2][]byte, 0, len(r.Headers))
			for _, h := range r.Headers {
				hs = append(hs, [2][]byte{[]byte(h.Key), h.Value})
			}
			compat.EmitRecord(r.Partition, r.Offset, r.Key, r.Value, hs)
			last[r.Partition] = r
			n++
			idle.Record()
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), compat.Timeout)
	defer cancel()
	if pollErr == nil && len(last) > 0 {
		recs := make([]*kgo.Record, 0, len(last))
		for _, r := range last {
			recs = append(recs, r)
		}
		if err := cl.CommitRecords(ctx, recs...); err != nil {
			pollErr = fmt.Errorf("commit: %w", err)
		}
	}
	if err := cl.LeaveGroupContext(ctx); err != nil && pollErr == nil {
		pollErr = fmt.Errorf("leave group: %w", err)
	}
	if pollErr != nil {
		return nil, pollErr
	}
	return map[string]any{"consumed": n}, nil
}

func describe(bootstrap string, args []string) (any, error) {
	topic := args[0]
	adm, done, err := admin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), compat.Timeout)
	defer cancel()
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	td, ok := tds[topic]
	if !ok {
		return nil, fmt.Errorf("metadata of %s: topic not in the response", topic)
	}
	if td.Err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, td.Err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describe configs: %w", err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return nil, fmt.Errorf("describe configs: %w", err)
	}
	if rc.Err != nil {
		return nil, fmt.Errorf("describe configs: %w", withMessage(rc.Err, rc.ErrMessage))
	}
	configs := make(map[string]*string, len(rc.Configs))
	for _, c := range rc.Configs {
		configs[c.Key] = c.Value
	}
	return map[string]any{"partitions": len(td.Partitions), "configs": configs}, nil
}

func alter(bootstrap string, args []string) (any, error) {
	topic, name, value := args[0], args[1], args[2]
	adm, done, err := admin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), compat.Timeout)
	defer cancel()
	// IncrementalAlterConfigs (kadm's AlterTopicConfigsState is the legacy AlterConfigs).
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: name, Value: &value}}, topic)
	if err != nil {
		return nil, fmt.Errorf("incremental alter configs: %w", err)
	}
	r, err := resps.On(topic, nil)
	if err != nil {
		return nil, fmt.Errorf("incremental alter configs: %w", err)
	}
	if r.Err != nil {
		return nil, fmt.Errorf("incremental alter configs: %w", withMessage(r.Err, r.ErrMessage))
	}
	return map[string]any{}, nil
}

func deleteTopic(bootstrap string, args []string) (any, error) {
	topic := args[0]
	adm, done, err := admin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), compat.Timeout)
	defer cancel()
	resps, err := adm.DeleteTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("delete topics: %w", err)
	}
	r, ok := resps[topic]
	if !ok {
		return nil, fmt.Errorf("delete topics: no result for %s", topic)
	}
	if r.Err != nil {
		return nil, fmt.Errorf("delete topics: %w", withMessage(r.Err, r.ErrMessage))
	}
	// Wait until the topic is no longer listed.
	for {
		tds, err := adm.ListTopics(ctx)
		if err != nil {
			return nil, fmt.Errorf("list topics: %w", err)
		}
		if !tds.Has(topic) {
			return map[string]any{}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s still listed %v after its deletion", topic, compat.Timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func list(bootstrap string, _ []string) (any, error) {
	adm, done, err := admin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), compat.Timeout)
	defer cancel()
	tds, err := adm.ListTopics(ctx)
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	names := tds.Names()
	sort.Strings(names)
	return map[string]any{"topics": names}, nil
}

// Command sarama is the IBM/sarama driver of the client compatibility matrix
// (tests/compat/README.md): sarama's AsyncProducer, ConsumerGroup and ClusterAdmin.
package main

import (
	"context"
	"fmt"
	"log"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"silt/compat/internal/compat"
)

func main() {
	if compat.Debug {
		sarama.Logger = log.New(compat.DebugOut(), "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	}
	compat.Main(map[string]compat.Command{
		"codecs":   {Args: 0, Run: codecs},
		"create":   {Args: 2, Run: create},
		"produce":  {Args: 3, Run: produce},
		"consume":  {Args: 4, Run: consume},
		"describe": {Args: 1, Run: describe},
		"alter":    {Args: 3, Run: alter},
		"delete":   {Args: 1, Run: deleteTopic},
		"list":     {Args: 0, Run: list},
	})
}

var codecOpts = map[string]sarama.CompressionCodec{
	"none":   sarama.CompressionNone,
	"gzip":   sarama.CompressionGZIP,
	"snappy": sarama.CompressionSnappy,
	"lz4":    sarama.CompressionLZ4,
	"zstd":   sarama.CompressionZSTD,
}

func config() *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = "silt-compat-sarama"
	// Kafka 4.1, the version of the reference broker (sarama 1.61.1 knows up to V4_3_1_0):
	// record batches (magic 2) with headers, and the newest request versions sarama has,
	// capped by what the broker advertises in ApiVersions.
	c.Version = sarama.V4_1_0_0
	// The broker may take its time creating or deleting a topic; below the 30 s read timeout.
	c.Admin.Timeout = 20 * time.Second
	return c
}

func admin(bootstrap string) (sarama.ClusterAdmin, error) {
	a, err := sarama.NewClusterAdmin([]string{bootstrap}, config())
	if err != nil {
		return nil, fmt.Errorf("new cluster admin: %w", err)
	}
	return a, nil
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
	a, err := admin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	if err := a.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: int32(n), ReplicationFactor: 1}, false); err != nil {
		return nil, fmt.Errorf("create topic: %w", err)
	}
	// Wait until the metadata shows every partition with a leader.
	deadline := time.Now().Add(compat.Timeout)
	for {
		mds, err := a.DescribeTopics([]string{topic})
		if err != nil {
			return nil, fmt.Errorf("metadata of %s: %w", topic, err)
		}
		for _, md := range mds {
			if md.Name != topic || md.Err != sarama.ErrNoError || len(md.Partitions) != n {
				continue
			}
			ready := true
			for _, p := range md.Partitions {
				if p.Err != sarama.ErrNoError || p.Leader < 0 {
					ready = false
				}
			}
			if ready {
				return map[string]any{}, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s has no leader for all %d partitions after %v", topic, n, compat.Timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func produce(bootstrap string, args []string) (any, error) {
	topic, codec := args[0], args[1]
	count, err := compat.Int("COUNT", args[2])
	if err != nil {
		return nil, err
	}
	c := config()
	cc, ok := codecOpts[codec]
	if !ok {
		return nil, fmt.Errorf("unknown codec %q", codec)
	}
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Compression = cc
	c.Producer.Partitioner = sarama.NewHashPartitioner // sarama's default: FNV-1a of the key
	c.Producer.Return.Successes = true
	c.Producer.Return.Errors = true
	c.Producer.Flush.Frequency = 5 * time.Millisecond
	p, err := sarama.NewAsyncProducer([]string{bootstrap}, c)
	if err != nil {
		return nil, fmt.Errorf("new producer: %w", err)
	}
	closed := false
	closeProducer := func() error {
		if closed {
			return nil
		}
		closed = true
		done := make(chan error, 1)
		go func() { done <- p.Close() }()
		select {
		case err := <-done:
			return err
		case <-time.After(compat.Timeout):
			return fmt.Errorf("producer not closed after %v", compat.Timeout)
		}
	}
	defer closeProducer()

	timeout := time.After(compat.Timeout)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for i := 0; i < count; i++ {
			key, value, headers := compat.Record(codec, i)
			m := &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(key),
				Value: sarama.StringEncoder(value)}
			for _, h := range headers {
				m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h[0]), Value: []byte(h[1])})
			}
			select {
			case p.Input() <- m:
			case <-stop:
				return
			}
		}
	}()
	acked := 0
	for acked < count {
		select {
		case <-p.Successes():
			acked++
		case perr := <-p.Errors():
			key := ""
			if perr.Msg != nil && perr.Msg.Key != nil {
				if b, err := perr.Msg.Key.Encode(); err == nil {
					key = string(b)
				}
			}
			return nil, fmt.Errorf("produce %s: %w", key, perr.Err)
		case <-timeout:
			return nil, fmt.Errorf("%d of %d records not acknowledged after %v", count-acked, count, compat.Timeout)
		}
	}
	if err := closeProducer(); err != nil {
		return nil, fmt.Errorf("close producer: %w", err)
	}
	return map[string]any{"acked": acked}, nil
}

// handler prints the records of its claims until it has printed want of them, marking each
// one it printed (and only those) for the commit that Cleanup makes.
type handler struct {
	idle   *compat.Idle
	want   int
	cancel func()

	mu   sync.Mutex
	n    int
	next map[int32]int64 // per partition, the offset after the last record printed
}

func (h *handler) Setup(sarama.ConsumerGroupSession) error {
	h.idle.Assigned()
	return nil
}

// Cleanup runs once every ConsumeClaim has returned: it commits, synchronously, what was
// marked.
func (h *handler) Cleanup(s sarama.ConsumerGroupSession) error {
	s.Commit()
	return nil
}

func (h *handler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case <-s.Context().Done():
			return nil
		case m, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			h.mu.Lock()
			if h.n >= h.want {
				h.mu.Unlock()
				h.cancel()
				return nil
			}
			hs := make([][2][]byte, 0, len(m.Headers))
			for _, rh := range m.Headers {
				hs = append(hs, [2][]byte{rh.Key, rh.Value})
			}
			compat.EmitRecord(m.Partition, m.Offset, m.Key, m.Value, hs)
			s.MarkMessage(m, "")
			h.next[m.Partition] = m.Offset + 1
			h.n++
			h.idle.Record()
			if h.n >= h.want {
				h.cancel()
			}
			h.mu.Unlock()
		}
	}
}

func consume(bootstrap string, args []string) (any, error) {
	topic, groupID := args[0], args[1]
	want, err := compat.Int("MAX", args[2])
	if err != nil {
		return nil, err
	}
	idleMs, err := compat.Int("IDLE_MS", args[3])
	if err != nil {
		return nil, err
	}
	c := config()
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Return.Errors = true
	group, err := sarama.NewConsumerGroup([]string{bootstrap}, groupID, c)
	if err != nil {
		return nil, fmt.Errorf("new consumer group: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &handler{idle: compat.NewIdle(idleMs), want: want, cancel: cancel, next: map[int32]int64{}}

	var (
		errMu    sync.Mutex
		firstErr error
	)
	setErr := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		cancel()
	}
	errorsDone := make(chan struct{})
	go func() { // Consumer.Return.Errors: fetch and commit errors
		defer close(errorsDone)
		for err := range group.Errors() {
			setErr(err)
		}
	}()
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{topic}, h); err != nil {
				setErr(fmt.Errorf("consume: %w", err))
				return
			}
		}
	}()
	for ctx.Err() == nil {
		if h.idle.Over() {
			cancel()
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	select {
	case <-consumed: // the session was released: Cleanup has committed
	case <-time.After(compat.Timeout):
		setErr(fmt.Errorf("consumer group session not released after %v", compat.Timeout))
	}
	// Close leaves the group.
	closed := make(chan error, 1)
	go func() { closed <- group.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			setErr(fmt.Errorf("close consumer group: %w", err))
		}
	case <-time.After(compat.Timeout):
		setErr(fmt.Errorf("consumer group not closed after %v", compat.Timeout))
	}
	<-errorsDone

	h.mu.Lock()
	n, next := h.n, h.next
	h.mu.Unlock()
	errMu.Lock()
	err = firstErr
	errMu.Unlock()
	if err != nil {
		return nil, err
	}
	// sarama's Commit reports no error to its caller (some are retried later, which never
	// comes here): check that the group's offsets are those printed.
	if len(next) > 0 {
		if err := checkCommitted(bootstrap, topic, groupID, next); err != nil {
			return nil, err
		}
	}
	return map[string]any{"consumed": n}, nil
}

func checkCommitted(bootstrap, topic, group string, next map[int32]int64) error {
	a, err := admin(bootstrap)
	if err != nil {
		return err
	}
	defer a.Close()
	parts := make([]int32, 0, len(next))
	for p := range next {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	resp, err := a.ListConsumerGroupOffsets(group, map[string][]int32{topic: parts})
	if err != nil {
		return fmt.Errorf("fetch committed offsets: %w", err)
	}
	for _, p := range parts {
		b := resp.GetBlock(topic, p)
		if b == nil {
			return fmt.Errorf("commit: no committed offset of partition %d", p)
		}
		if b.Err != sarama.ErrNoError {
			return fmt.Errorf("commit: partition %d: %w", p, b.Err)
		}
		if b.Offset != next[p] {
			return fmt.Errorf("commit: partition %d committed at %d, not %d", p, b.Offset, next[p])
		}
	}
	return nil
}

func describe(bootstrap string, args []string) (any, error) {
	topic := args[0]
	a, err := admin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	mds, err := a.DescribeTopics([]string{topic})
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	var md *sarama.TopicMetadata
	for _, m := range mds {
		if m.Name == topic {
			md = m
		}
	}
	if md == nil {
		return nil, fmt.Errorf("metadata of %s: topic not in the response", topic)
	}
	if md.Err != sarama.ErrNoError {
		return nil, fmt.Errorf("metadata of %s: %w", topic, md.Err)
	}
	entries, err := a.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		return nil, fmt.Errorf("describe config: %w", err)
	}
	configs := make(map[string]string, len(entries))
	for _, e := range entries {
		configs[e.Name] = e.Value
	}
	return map[string]any{"partitions": len(md.Partitions), "configs": configs}, nil
}

func alter(bootstrap string, args []string) (any, error) {
	topic, name, value := args[0], args[1], args[2]
	a, err := admin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	err = a.IncrementalAlterConfig(sarama.TopicResource, topic, map[string]sarama.IncrementalAlterConfigsEntry{
		name: {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &value},
	}, false)
	if err != nil {
		return nil, fmt.Errorf("incremental alter config: %w", err)
	}
	return map[string]any{}, nil
}

func deleteTopic(bootstrap string, args []string) (any, error) {
	topic := args[0]
	a, err := admin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	if err := a.DeleteTopic(topic); err != nil {
		return nil, fmt.Errorf("delete topic: %w", err)
	}
	// Wait until the topic is no longer listed.
	deadline := time.Now().Add(compat.Timeout)
	for {
		topics, err := a.ListTopics()
		if err != nil {
			return nil, fmt.Errorf("list topics: %w", err)
		}
		if _, ok := topics[topic]; !ok {
			return map[string]any{}, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s still listed %v after its deletion", topic, compat.Timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func list(bootstrap string, _ []string) (any, error) {
	a, err := admin(bootstrap)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	topics, err := a.ListTopics()
	if err != nil {
		return nil, fmt.Errorf("list topics: %w", err)
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	sort.Strings(names)
	return map[string]any{"topics": names}, nil
}

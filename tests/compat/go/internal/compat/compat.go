// Package compat is what the Go drivers of the client compatibility matrix share: the
// command line of the driver contract (tests/compat/README.md), the records a produce step
// writes, and the JSON lines a driver prints.
package compat

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Timeout bounds every wait of a driver: a create or delete waiting for the metadata, a
// produce waiting for its acknowledgements, a consume in all.
const Timeout = 60 * time.Second

// watchdog ends a step whose client hangs past its own bounds (the runner gives a step
// 240 s).
const watchdog = 150 * time.Second

// Codecs are the compression codecs of the contract, in its order.
var Codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// Record is (key, value, headers) of record i of a `produce TOPIC CODEC COUNT` step.
func Record(codec string, i int) (key, value string, headers [][2]string) {
	key = fmt.Sprintf("%s-%06d", codec, i)
	value = key + ":" + strings.Repeat("abcdefghij", 20)
	headers = [][2]string{{"idx", strconv.Itoa(i)}, {"codec", codec}}
	return
}

// ErrUnsupported is returned by a command the client cannot do: the driver exits with
// status 3 and prints "unsupported".
var ErrUnsupported = errors.New("unsupported")

var (
	outMu sync.Mutex
	out   = bufio.NewWriterSize(os.Stdout, 1<<16)
)

// Emit prints v as one JSON line on stdout.
func Emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only our own types are printed
	}
	outMu.Lock()
	out.Write(b)
	out.WriteByte('\n')
	outMu.Unlock()
}

func flush() {
	outMu.Lock()
	out.Flush()
	outMu.Unlock()
}

// Text is b as a JSON string, or null for a null key, value or header value.
func Text(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// Consumed is the line of one consumed record.
type Consumed struct {
	P int32        `json:"p"`
	O int64        `json:"o"`
	K *string      `json:"k"`
	V *string      `json:"v"`
	H [][2]*string `json:"h"`
}

// EmitRecord prints the line of one consumed record; headers are (name, value) pairs in
// record order.
func EmitRecord(partition int32, offset int64, key, value []byte, headers [][2][]byte) {
	h := make([][2]*string, 0, len(headers))
	for _, kv := range headers {
		name := string(kv[0])
		h = append(h, [2]*string{&name, Text(kv[1])})
	}
	Emit(Consumed{P: partition, O: offset, K: Text(key), V: Text(value), H: h})
}

// Command is one command of the contract: the number of its arguments and what it does.
// What Run returns (unless nil) is printed as one JSON line.
type Command struct {
	Args int
	Run  func(bootstrap string, args []string) (any, error)
}

// SecurityOptions are the optional security options of a driver's command line: TLS when CA
// is set (with a client certificate when Cert and Key are), SASL when Mechanism is. Password
// comes from COMPAT_SASL_PASSWORD, an OAUTHBEARER token from COMPAT_SASL_TOKEN.
type SecurityOptions struct {
	CA, Cert, Key                    string
	Mechanism, User, Password, Token string
}

// Security holds the options given to this run of the driver.
var Security SecurityOptions

// Debug is true when COMPAT_DEBUG is set: the drivers then log their client to stderr.
var Debug = os.Getenv("COMPAT_DEBUG") != ""

// DebugOut is where the client logs go (stderr when debugging, else nowhere).
func DebugOut() io.Writer {
	if Debug {
		return os.Stderr
	}
	return io.Discard
}

func fail(status int, msg string) {
	flush()
	fmt.Fprintln(os.Stderr, strings.Join(strings.Fields(msg), " "))
	os.Exit(status)
}

// Main parses `--bootstrap HOST:PORT COMMAND ARGS...`, runs the command and exits: 0 when it
// succeeded, 1 with its error as the last line of stderr, 3 with "unsupported" for a
// command the client cannot do.
func Main(commands map[string]Command) {
	fs := flag.NewFlagSet(os.Args[0], flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	bootstrap := fs.String("bootstrap", "", "HOST:PORT of a broker")
	fs.StringVar(&Security.CA, "tls-ca", "", "PEM file of the CAs to trust: connect over TLS")
	fs.StringVar(&Security.Cert, "tls-cert", "", "PEM file of the client certificate (mTLS)")
	fs.StringVar(&Security.Key, "tls-key", "", "PEM file of the client certificate's key")
	fs.StringVar(&Security.Mechanism, "sasl-mechanism", "",
		"PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER: authenticate with SASL")
	fs.StringVar(&Security.User, "sasl-user", "", "SASL user name")
	if err := fs.Parse(os.Args[1:]); err != nil {
		fail(2, err.Error())
	}
	// A password or token is read from the environment, not the command line.
	Security.Password = os.Getenv("COMPAT_SASL_PASSWORD")
	Security.Token = os.Getenv("COMPAT_SASL_TOKEN")
	args := fs.Args()
	if *bootstrap == "" || len(args) == 0 {
		fail(2, "usage: "+os.Args[0]+" --bootstrap HOST:PORT COMMAND ARGS...")
	}
	name, args := args[0], args[1:]
	cmd, ok := commands[name]
	if !ok {
		fail(3, "unsupported")
	}
	if len(args) != cmd.Args {
		fail(2, fmt.Sprintf("%s takes %d arguments, not %d", name, cmd.Args, len(args)))
	}
	timer := time.AfterFunc(watchdog, func() {
		fail(1, fmt.Sprintf("%s: no result after %v", name, watchdog))
	})
	res, err := cmd.Run(*bootstrap, args)
	timer.Stop()
	if errors.Is(err, ErrUnsupported) {
		fail(3, "unsupported")
	}
	if err != nil {
		fail(1, err.Error())
	}
	if res != nil {
		Emit(res)
	}
	flush()
	os.Exit(0)
}

// Int parses a numeric argument.
func Int(name, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s: %q is not a number", name, s)
	}
	return n, nil
}

// Idle tracks the stop rule of a consume step: stop once MAX records are printed, or when
// none came for IDLE_MS after the group's first assignment, or after Timeout in all.
type Idle struct {
	mu       sync.Mutex
	start    time.Time
	last     time.Time // the assignment or the last record; zero before the assignment
	idle     time.Duration
	assigned bool
}

// NewIdle starts the clock of a consume step.
func NewIdle(idleMs int) *Idle {
	return &Idle{start: time.Now(), idle: time.Duration(idleMs) * time.Millisecond}
}

// Assigned notes the group's (first) assignment.
func (t *Idle) Assigned() {
	t.mu.Lock()
	if !t.assigned {
		t.assigned = true
		t.last = time.Now()
	}
	t.mu.Unlock()
}

// Record notes a record handed to the output.
func (t *Idle) Record() {
	t.mu.Lock()
	t.last = time.Now()
	t.mu.Unlock()
}

// Over says whether the step should stop polling (not counting MAX).
func (t *Idle) Over() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if now.Sub(t.start) >= Timeout {
		return true
	}
	return t.assigned && now.Sub(t.last) > t.idle
}

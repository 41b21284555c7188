package natswire

import (
	"errors"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
)

// inboxMux receives every JetStream reply of a wire on one wildcard
// subscription (no subscribe/unsubscribe round trip per request).
type inboxMux struct {
	nc *nats.Conn

	mu      sync.Mutex
	prefix  string
	sub     *nats.Subscription
	pending map[string]chan *nats.Msg
	seq     uint64
	closed  bool
	done    chan struct{} // closed by close: no reply will arrive any more
}

func newInboxMux(nc *nats.Conn) *inboxMux {
	return &inboxMux{nc: nc, pending: map[string]chan *nats.Msg{}, done: make(chan struct{})}
}

// errWireClosed is register's error once the wire is closed.
var errWireClosed = errors.New("the wire is closed")

// register returns a fresh reply subject and the channel its first reply
// arrives on; cancel forgets it.
func (x *inboxMux) register() (string, <-chan *nats.Msg, func(), error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return "", nil, nil, errWireClosed
	}
	if x.sub == nil {
		x.prefix = nats.NewInbox()
		sub, err := x.nc.Subscribe(x.prefix+".*", x.deliver)
		if err != nil {
			return "", nil, nil, err
		}
		x.sub = sub
	}
	x.seq++
	token := strconv.FormatUint(x.seq, 36)
	ch := make(chan *nats.Msg, 1)
	x.pending[token] = ch
	return x.prefix + "." + token, ch, func() {
		x.mu.Lock()
		delete(x.pending, token)
		x.mu.Unlock()
	}, nil
}

func (x *inboxMux) deliver(m *nats.Msg) {
	x.mu.Lock()
	ch := x.pending[m.Subject[min(len(x.prefix)+1, len(m.Subject)):]]
	x.mu.Unlock()
	if ch != nil {
		select {
		case ch <- m: // the first reply wins (several replicas may answer a sysmsg)
		default:
		}
	}
}

func (x *inboxMux) close() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return
	}
	x.closed = true
	close(x.done)
	if x.sub != nil {
		_ = x.sub.Unsubscribe()
	}
}

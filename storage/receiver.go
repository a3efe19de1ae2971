package storage

import (
	"context"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Receiver holds a process's shard subscriptions (SSUBSCRIBE) on one
// dedicated connection per Redis primary, and dispatches each message to
// its channel's callback: no goroutine per subscription, where Subscribe
// blocks one (and its stack) per channel for as long as it lasts. One
// goroutine (run) makes and mends the subscriptions: a new channel is
// subscribed on the connection of its slot's primary; a channel the server
// drops (its slot moved: Redis sends SUNSUBSCRIBE) and every channel of a
// connection that breaks (a failover, a restart) are subscribed again
// where the topology now puts them, with a backoff of 50 ms doubling to
// 2 s while that fails. Each confirmation runs the channel's onSubscribed,
// so the caller re-reads what a gap may have lost, as with Subscribe.
//
// Callbacks run on the connection's reader goroutine, one at a time in the
// order of the connection: the events of a mailbox, which all come through
// its slot's primary, keep their order. They must not block.
type Receiver struct {
	s     *Store
	mu    sync.Mutex
	chans map[string]*listener // by channel: the current listener
	conns map[string]*recvConn // by address
	want  []*listener          // to subscribe
	drop  []unsub              // to unsubscribe
	kick  chan struct{}
}

type listener struct {
	ch           string
	onEvent      func(Event)
	onSubscribed func()
	conn         *recvConn // nil: to be subscribed
}

type unsub struct {
	conn *recvConn
	ch   string
}

type recvConn struct {
	addr    string
	dc      rueidis.DedicatedClient
	release func()
	chans   map[string]*listener // subscribed (or being subscribed) here
	dead    bool
}

// NewReceiver returns the store's receiver, started.
func (s *Store) NewReceiver() *Receiver {
	r := &Receiver{s: s, chans: map[string]*listener{}, conns: map[string]*recvConn{}, kick: make(chan struct{}, 1)}
	go r.run()
	return r
}

// Listen is the store's Receiver's Listen; the receiver starts at the
// first call.
func (s *Store) Listen(tag string, onEvent func(Event), onSubscribed func()) (stop func()) {
	s.recvOnce.Do(func() { s.recv = s.NewReceiver() })
	return s.recv.Listen(tag, onEvent, onSubscribed)
}

// Listen delivers the events of the mailbox with tag until the returned
// function is called (Subscribe's contract, without its goroutine).
func (r *Receiver) Listen(tag string, onEvent func(Event), onSubscribed func()) (stop func()) {
	l := &listener{ch: r.s.keys.events(tag), onEvent: onEvent, onSubscribed: onSubscribed}
	r.mu.Lock()
	if old := r.chans[l.ch]; old != nil {
		r.forgetLocked(old)
	}
	r.chans[l.ch] = l
	r.want = append(r.want, l)
	r.mu.Unlock()
	r.poke()
	return func() {
		r.mu.Lock()
		if r.chans[l.ch] == l {
			delete(r.chans, l.ch)
		}
		r.forgetLocked(l)
		r.mu.Unlock()
		r.poke()
	}
}

// forgetLocked takes l off its connection (an SUNSUBSCRIBE is due) and off
// the list to subscribe.
func (r *Receiver) forgetLocked(l *listener) {
	if c := l.conn; c != nil {
		if c.chans[l.ch] == l {
			delete(c.chans, l.ch)
			if !c.dead {
				r.drop = append(r.drop, unsub{c, l.ch})
			}
		}
		l.conn = nil
	}
	l.onEvent, l.onSubscribed = func(Event) {}, func() {}
}

func (r *Receiver) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

func (r *Receiver) run() {
	backoff := time.Duration(0)
	for {
		if backoff > 0 {
			select {
			case <-r.kick:
			case <-time.After(backoff):
			}
		} else {
			<-r.kick
		}
		if r.work() {
			backoff = 0
		} else {
			backoff = min(max(2*backoff, 50*time.Millisecond), 2*time.Second)
		}
	}
}

// work sends what is due: the unsubscriptions, then the subscriptions,
// pipelined per connection. It reports whether everything went.
func (r *Receiver) work() bool {
	r.mu.Lock()
	drop, want := r.drop, r.want
	r.drop, r.want = nil, nil
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ok := true
	byConn := map[*recvConn][]string{}
	for _, u := range drop {
		byConn[u.conn] = append(byConn[u.conn], u.ch)
	}
	for c, chans := range byConn {
		cmds := make(rueidis.Commands, 0, len(chans))
		for _, ch := range chans {
			cmds = append(cmds, c.dc.B().Sunsubscribe().Channel(ch).Build())
		}
		c.dc.DoMulti(ctx, cmds...) // a broken connection drops its subscriptions anyway
	}
	subs := map[*recvConn][]*listener{}
	var retry []*listener
	for _, l := range want {
		r.mu.Lock()
		current := r.chans[l.ch] == l && l.conn == nil
		r.mu.Unlock()
		if !current {
			continue
		}
		c, err := r.connFor(ctx, l.ch)
		if err != nil {
			retry = append(retry, l)
			continue
		}
		r.mu.Lock()
		if c.dead || r.chans[l.ch] != l {
			r.mu.Unlock()
			retry = append(retry, l)
			continue
		}
		// Registered before SSUBSCRIBE goes: its confirmation and first
		// messages find it.
		l.conn = c
		c.chans[l.ch] = l
		r.mu.Unlock()
		subs[c] = append(subs[c], l)
	}
	for c, ls := range subs {
		cmds := make(rueidis.Commands, 0, len(ls))
		for _, l := range ls {
			cmds = append(cmds, c.dc.B().Ssubscribe().Channel(l.ch).Build())
		}
		for i, res := range c.dc.DoMulti(ctx, cmds...) {
			if res.Error() == nil {
				continue
			}
			// Not subscribed (a MOVED: the view was stale; the connection
			// broke): again, after a fresh look at the topology.
			r.s.topo.stale()
			r.mu.Lock()
			if l := ls[i]; l.conn == c {
				delete(c.chans, l.ch)
				l.conn = nil
				retry = append(retry, l)
			}
			r.mu.Unlock()
		}
	}
	if len(retry) > 0 {
		ok = false
		r.mu.Lock()
		r.want = append(r.want, retry...)
		r.mu.Unlock()
	}
	return ok
}

// connFor is the connection to the primary that serves channel ch, opened
// if need be.
func (r *Receiver) connFor(ctx context.Context, ch string) (*recvConn, error) {
	nodes := r.s.client.Nodes()
	addr := ""
	if len(nodes) == 1 {
		for a := range nodes {
			addr = a // a standalone server (or a one-node cluster)
		}
	} else {
		cmd := r.s.client.B().Ssubscribe().Channel(ch).Build()
		slot := cmd.Slot()
		_, owner, err := r.s.topo.replicas(ctx, r.s.client, slot)
		if err != nil {
			return nil, err
		}
		if addr = r.s.topo.addr(owner); addr == "" {
			r.s.topo.stale()
			return nil, ErrUnavailable
		}
	}
	r.mu.Lock()
	c := r.conns[addr]
	r.mu.Unlock()
	if c != nil {
		return c, nil
	}
	node := nodes[addr]
	if node == nil {
		r.s.topo.stale()
		return nil, ErrUnavailable
	}
	c = &recvConn{addr: addr, chans: map[string]*listener{}}
	c.dc, c.release = node.Dedicate()
	closed := c.dc.SetPubSubHooks(rueidis.PubSubHooks{
		OnMessage: func(m rueidis.PubSubMessage) {
			r.mu.Lock()
			l := c.chans[m.Channel]
			var on func(Event)
			if l != nil {
				on = l.onEvent
			}
			r.mu.Unlock()
			if on != nil {
				if ev, err := ParseEvent([]byte(m.Message)); err == nil {
					on(ev)
				}
			}
		},
		OnSubscription: func(s rueidis.PubSubSubscription) {
			r.mu.Lock()
			l := c.chans[s.Channel]
			var on func()
			switch {
			case l == nil:
			case s.Kind == "ssubscribe":
				on = l.onSubscribed
			case s.Kind == "sunsubscribe":
				// Not asked for (a channel we drop is off c.chans first):
				// the slot moved. Subscribe it where it is now.
				delete(c.chans, s.Channel)
				l.conn = nil
				r.want = append(r.want, l)
				r.s.topo.stale()
				defer r.poke()
			}
			r.mu.Unlock()
			if on != nil {
				on()
			}
		},
	})
	r.mu.Lock()
	r.conns[addr] = c
	r.mu.Unlock()
	go r.watch(c, closed)
	return c, nil
}

// watch waits for c to break, then subscribes its channels again elsewhere
// (or on the same address, once it is back).
func (r *Receiver) watch(c *recvConn, closed <-chan error) {
	for range closed {
	}
	r.mu.Lock()
	c.dead = true
	if r.conns[c.addr] == c {
		delete(r.conns, c.addr)
	}
	for ch, l := range c.chans {
		delete(c.chans, ch)
		if l.conn == c {
			l.conn = nil
			r.want = append(r.want, l)
		}
	}
	r.mu.Unlock()
	c.release()
	r.s.topo.stale()
	r.poke()
}

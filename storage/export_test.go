package storage

import "context"

// DeliverBatchOn stores msgs[i] at addresses[i] as one group commit sent to
// the primary at addr, whichever node owns each address's slot, each write
// waiting for need replicas: a script answered MOVED then takes the path
// Deliver takes after such an answer. It lets a test build the batch that
// concurrency would only make likely.
func DeliverBatchOn(ctx context.Context, s *Store, addr string, need int, addresses []string, msgs []NewMessage) ([]Summary, []error) {
	ds := make([]delivery, len(addresses))
	calls := make([]*durableCall, len(addresses))
	sums, errs := make([]Summary, len(addresses)), make([]error, len(addresses))
	for i, a := range addresses {
		if ds[i], errs[i] = s.delivery(a, msgs[i]); errs[i] != nil {
			return sums, errs
		}
		calls[i] = &durableCall{ctx: ctx, op: "deliver", sc: s.scripts.deliver, keys: ds[i].keys, args: ds[i].args,
			need: need, done: make(chan struct{})}
	}
	s.commit(addr, calls)
	for i, c := range calls {
		if c.alone {
			c.vals, c.err = s.exec(ctx, c.op, c.sc, c.keys, c.args)
		}
		sums[i], errs[i] = ds[i].result(c.vals, c.err)
	}
	return sums, errs
}

// SetDeliverScript replaces the delivery script of s with body (lib.lua
// prepended), so a test can make a real Redis answer what the real script
// never does.
func SetDeliverScript(s *Store, body string) {
	s.scripts.deliver = newDurableScript(mustRead("lib.lua") + body)
}

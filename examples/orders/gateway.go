package orders

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Gateway charges customers: a payment provider, in a real service.
type Gateway interface {
	// Charge charges inv.Cents to inv.Customer and returns a receipt. Its
	// error says what trying again could change: [ErrBusy] (or any other
	// error) that it may succeed, [ErrDeclined] that it never will,
	// [ErrNoAnswer] that the charge was sent and its answer lost.
	Charge(ctx context.Context, inv Invoice) (receipt string, err error)
}

// The answers of a [Gateway] that the invoice handler tells apart.
var (
	ErrBusy     = errors.New("gateway busy (HTTP 503)")
	ErrDeclined = errors.New("card declined")
	ErrNoAnswer = errors.New("no answer from the gateway after the charge was sent")
)

// Behaviour is how a [SimulatedGateway] treats a customer.
type Behaviour string

// The behaviours of [Customers].
const (
	Pays       Behaviour = "pays"        // charged at once
	BusyOnce   Behaviour = "busy once"   // ErrBusy at the first charge of an order, then charged
	Declines   Behaviour = "declines"    // ErrDeclined, always
	NoAnswer   Behaviour = "no answer"   // ErrNoAnswer, always
	AlwaysBusy Behaviour = "always busy" // ErrBusy, always
)

// Customers are the customers a [SimulatedGateway] knows and how it treats
// each; it charges any other customer at once.
var Customers = map[string]Behaviour{
	"acme":     Pays,
	"globex":   Pays,
	"initech":  BusyOnce,
	"umbrella": Declines,
	"hooli":    NoAnswer,
	"vandelay": AlwaysBusy,
}

// rotation is the order in which [Sample] takes customers: of every ten
// orders, six are charged at once, one after a busy first try, one is
// declined, one gets no answer and one finds the gateway always busy.
var rotation = []string{"acme", "globex", "initech", "acme", "umbrella", "globex", "acme", "hooli", "globex", "vandelay"}

// Sample returns n orders whose customers follow a fixed rotation of ten
// (see [Customers]), with amounts between 10.00 and 99.99.
func Sample(n int) []Order {
	out := make([]Order, n)
	for i := range out {
		out[i] = Order{Customer: rotation[i%len(rotation)], Cents: 1000 + int64(i*7919%9000)}
	}
	return out
}

// SimulatedGateway is a [Gateway] that treats each customer as [Customers]
// says. It remembers how often it was asked to charge each order, in
// memory. The zero value is ready to use and safe for concurrent use.
type SimulatedGateway struct {
	// Latency is the longest a charge takes; each takes a fixed share of
	// it, by order, between a tenth and all of it. Zero: charges answer at
	// once.
	Latency time.Duration

	mu    sync.Mutex
	calls map[int64]int // charges asked for, by order
}

// Charge answers as [Customers] says inv.Customer is treated, after the
// order's share of Latency. It returns ctx's error if ctx ends first.
func (g *SimulatedGateway) Charge(ctx context.Context, inv Invoice) (string, error) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = map[int64]int{}
	}
	g.calls[inv.Order]++
	call := g.calls[inv.Order]
	g.mu.Unlock()

	if g.Latency > 0 {
		wait := g.Latency * time.Duration(inv.Order*7%10+1) / 10
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(wait):
		}
	}
	switch Customers[inv.Customer] {
	case BusyOnce:
		if call == 1 {
			return "", ErrBusy
		}
	case Declines:
		return "", ErrDeclined
	case NoAnswer:
		return "", ErrNoAnswer
	case AlwaysBusy:
		return "", ErrBusy
	}
	return fmt.Sprintf("R-%06d", inv.Order), nil
}

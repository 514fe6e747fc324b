package job

import "sync"

// EventQueue carries a cluster's events to Run without ever blocking the
// cluster: Push appends, a goroutine delivers in order on Out. It holds
// at most the events of the launches a job makes (two each: placed,
// exited), so it needs no bound of its own. Close stops the delivery;
// events not yet delivered are dropped.
type EventQueue struct {
	out  chan Event
	mu   sync.Mutex
	q    []Event
	wake chan struct{}
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// NewEventQueue returns a running queue.
func NewEventQueue() *EventQueue {
	q := &EventQueue{out: make(chan Event), wake: make(chan struct{}, 1), done: make(chan struct{})}
	q.wg.Add(1)
	go q.pump()
	return q
}

// Push queues ev. It never blocks and is safe for concurrent use.
func (q *EventQueue) Push(ev Event) {
	q.mu.Lock()
	q.q = append(q.q, ev)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Out delivers the events in the order pushed.
func (q *EventQueue) Out() <-chan Event { return q.out }

// Close stops the delivery and waits for the goroutine to end. It is
// idempotent.
func (q *EventQueue) Close() {
	q.once.Do(func() { close(q.done) })
	q.wg.Wait()
}

func (q *EventQueue) pump() {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		var next Event
		have := len(q.q) > 0
		if have {
			next = q.q[0]
		}
		q.mu.Unlock()
		if !have {
			select {
			case <-q.wake:
				continue
			case <-q.done:
				return
			}
		}
		select {
		case q.out <- next:
			q.mu.Lock()
			q.q[0] = Event{}
			q.q = q.q[1:]
			q.mu.Unlock()
		case <-q.done:
			return
		}
	}
}

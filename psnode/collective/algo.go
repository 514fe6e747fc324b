package collective

import "unsafe"

// smallPath says whether n elements of T take the latency-bound
// algorithms.
func smallPath[T Elem](n int) bool {
	var zero T
	return n*int(unsafe.Sizeof(zero)) <= SmallBytes
}

func mod(a, n int) int { return ((a % n) + n) % n }

// chunkElems is how many elements of T make one chunk.
func chunkElems[T Elem](g *Group) int {
	var zero T
	return max(1, g.chunk/int(unsafe.Sizeof(zero)))
}

// chunks returns the number of chunks of [lo, hi) and the range of chunk
// i.
func chunks(lo, hi, ce int) int { return (hi - lo + ce - 1) / ce }

func chunkRange(lo, hi, ce, i int) (int, int) {
	a := lo + i*ce
	return a, min(hi, a+ce)
}

// ring runs steps from..to of the ring AllReduce on buf: steps 0..N-2
// are the reduce-scatter, N-1..2N-3 the all-gather. At step K rank r
// sends segment (r-K-1) mod N to r+1 and receives segment (r-K-2) mod N
// from r-1, segment s being Shard(len(buf), s); in the reduce-scatter it
// combines what it receives (the partial result of the ranks before it on
// the ring, as the left operand) with its own values, so after step N-2
// it holds segment r reduced over all ranks, in the order r+1, r+2, ...,
// r. Each segment travels in chunks, and a chunk is sent on as soon as it
// has been received and combined, so a large buffer streams through the
// ring instead of waiting for whole segments.
func ring[T Elem](c *call, buf []T, op Op, from, to int) error {
	g := c.g
	n, r := g.Size(), g.rank
	if from > to || n == 1 {
		return nil
	}
	next, prev := mod(r+1, n), mod(r-1, n)
	ce := chunkElems[T](g)
	seg := func(step int) (int, int) { return shard(len(buf), n, mod(r-step-1, n)) }
	lo, hi := seg(from)
	for i := range chunks(lo, hi, ce) {
		a, b := chunkRange(lo, hi, ce, i)
		if err := c.send(next, uint32(from), uint32(i), wireBytes(buf[a:b])); err != nil {
			return err
		}
	}
	for step := from; step <= to; step++ {
		lo, hi := seg(step + 1) // what r-1 sends at step is r's segment of step+1
		for i := range chunks(lo, hi, ce) {
			a, b := chunkRange(lo, hi, ce, i)
			d, err := c.recv(prev, uint32(step), uint32(i), b-a)
			if err != nil {
				return err
			}
			if step < n-1 {
				combine(buf[a:b], elems[T](d), op, true)
				if step == n-2 {
					finish(buf[a:b], op, n)
				}
			} else {
				copy(buf[a:b], elems[T](d))
			}
			if step < to {
				if err := c.send(next, uint32(step+1), uint32(i), wireBytes(buf[a:b])); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// doubling is the small-buffer AllReduce, recursive doubling: with p the
// largest power of two not above N, ranks p..N-1 first hand their values
// to rank r-p (which combines them as the right operand); ranks 0..p-1
// then exchange with the rank whose number differs in bit j, for each
// bit, combining with the lower rank's values as the left operand, so
// both sides compute the same bits; finally ranks r-p hand the result
// back. log2(p) exchanges (plus two for the ranks beyond p), every
// combination fixed by rank.
func doubling[T Elem](c *call, buf []T, op Op) error {
	g := c.g
	n, r := g.Size(), g.rank
	if n == 1 {
		finish(buf, op, n)
		return nil
	}
	p := 1
	for p*2 <= n {
		p *= 2
	}
	const foldIn, foldOut = 0, 1 << 20
	if r >= p {
		if err := c.send(r-p, foldIn, 0, wireBytes(buf)); err != nil {
			return err
		}
		d, err := c.recv(r-p, foldOut, 0, len(buf))
		if err != nil {
			return err
		}
		copy(buf, elems[T](d))
		return nil
	}
	if r+p < n {
		d, err := c.recv(r+p, foldIn, 0, len(buf))
		if err != nil {
			return err
		}
		combine(buf, elems[T](d), op, false)
	}
	step := uint32(1)
	for mask := 1; mask < p; mask <<= 1 {
		partner := r ^ mask
		if err := c.send(partner, step, 0, wireBytes(buf)); err != nil {
			return err
		}
		d, err := c.recv(partner, step, 0, len(buf))
		if err != nil {
			return err
		}
		combine(buf, elems[T](d), op, partner < r)
		step++
	}
	finish(buf, op, n)
	if r+p < n {
		return c.send(r+p, foldOut, 0, wireBytes(buf))
	}
	return nil
}

// binomialBroadcast is the small-buffer Broadcast: with ranks numbered
// from the root (v = r-root mod N), rank v receives from v minus its
// lowest set bit and then sends to v+2^k for every 2^k below that bit
// (the root: below N), largest first.
func binomialBroadcast[T Elem](c *call, buf []T, root int) error {
	g := c.g
	n := g.Size()
	v := mod(g.rank-root, n)
	mask := 1
	for mask < n {
		if v&mask != 0 {
			d, err := c.recv(mod(v-mask+root, n), 0, 0, len(buf))
			if err != nil {
				return err
			}
			copy(buf, elems[T](d))
			break
		}
		mask <<= 1
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if v+mask < n {
			if err := c.send(mod(v+mask+root, n), 0, 0, wireBytes(buf)); err != nil {
				return err
			}
		}
	}
	return nil
}

// chainBroadcast is the large-buffer Broadcast: the buffer streams in
// chunks along the chain root, root+1, ..., each rank passing a chunk on
// as soon as it has it.
func chainBroadcast[T Elem](c *call, buf []T, root int) error {
	g := c.g
	n := g.Size()
	v := mod(g.rank-root, n)
	ce := chunkElems[T](g)
	next, prev := mod(g.rank+1, n), mod(g.rank-1, n)
	for i := range chunks(0, len(buf), ce) {
		a, b := chunkRange(0, len(buf), ce, i)
		if v > 0 {
			d, err := c.recv(prev, 0, uint32(i), b-a)
			if err != nil {
				return err
			}
			copy(buf[a:b], elems[T](d))
		}
		if v < n-1 {
			if err := c.send(next, 0, uint32(i), wireBytes(buf[a:b])); err != nil {
				return err
			}
		}
	}
	return nil
}

// gather brings every rank's reduced shard (after the ring's
// reduce-scatter) to root, in chunks.
func gather[T Elem](c *call, buf []T, root int) error {
	g := c.g
	n := g.Size()
	ce := chunkElems[T](g)
	step := uint32(n) // after the reduce-scatter's steps
	if g.rank != root {
		lo, hi := shard(len(buf), n, g.rank)
		for i := range chunks(lo, hi, ce) {
			a, b := chunkRange(lo, hi, ce, i)
			if err := c.send(root, step, uint32(i), wireBytes(buf[a:b])); err != nil {
				return err
			}
		}
		return nil
	}
	for s := range n {
		if s == root {
			continue
		}
		lo, hi := shard(len(buf), n, s)
		for i := range chunks(lo, hi, ce) {
			a, b := chunkRange(lo, hi, ce, i)
			d, err := c.recv(s, step, uint32(i), b-a)
			if err != nil {
				return err
			}
			copy(buf[a:b], elems[T](d))
		}
	}
	return nil
}

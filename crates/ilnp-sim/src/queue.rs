//! The event queue: items leave in (time, insertion sequence) order, exactly as
//! from one `BinaryHeap`, but a calendar of 1 ms buckets keeps the heap that is
//! sifted small. With 10^5 hosts a single heap held ~10^5 pending items and its
//! `pop` (cache misses at every level) was a fifth of the run; here the items of
//! the current millisecond are in a small heap, the next 16 s in unsorted buckets
//! (O(1) push), and later ones in an overflow heap moved in as the window slides.
//! The window is 16 s, not 4, so that periodic work of every host (a datagram every
//! 10 s, LU timers, moves every 30-300 s are rarer) goes straight into a bucket:
//! with 10^4 hosts sending every 10 s the overflow heap's pops were a tenth of a run.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Bucket width (ns) and count: a 16.384 s window.
const WIDTH: u64 = 1_000_000;
const BUCKETS: usize = 16384;
const SPAN: u64 = WIDTH * BUCKETS as u64;

struct Item<T> {
    t: u64,
    seq: u64,
    v: T,
}
impl<T> PartialEq for Item<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.t, self.seq) == (o.t, o.seq)
    }
}
impl<T> Eq for Item<T> {}
impl<T> PartialOrd for Item<T> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Item<T> {
    // min-heap on (time, sequence)
    fn cmp(&self, o: &Self) -> Ordering {
        (o.t, o.seq).cmp(&(self.t, self.seq))
    }
}

pub struct Calendar<T> {
    /// items of the current bucket (and any pushed for an earlier time)
    now: BinaryHeap<Item<T>>,
    buckets: Vec<Vec<Item<T>>>,
    /// items in `buckets`
    in_buckets: usize,
    /// start of the current bucket; `buckets` hold [cur + WIDTH, cur + SPAN)
    cur: u64,
    later: BinaryHeap<Item<T>>,
    seq: u64,
}

impl<T> Default for Calendar<T> {
    fn default() -> Self {
        Calendar {
            now: BinaryHeap::new(),
            buckets: (0..BUCKETS).map(|_| Vec::new()).collect(),
            in_buckets: 0,
            cur: 0,
            later: BinaryHeap::new(),
            seq: 0,
        }
    }
}

impl<T> Calendar<T> {
    #[inline]
    pub fn push(&mut self, t: u64, v: T) {
        self.seq += 1;
        let it = Item { t, seq: self.seq, v };
        if t < self.cur + WIDTH {
            self.now.push(it);
        } else if t < self.cur + SPAN {
            self.buckets[((t / WIDTH) as usize) % BUCKETS].push(it);
            self.in_buckets += 1;
        } else {
            self.later.push(it);
        }
    }

    /// The next item if it is in the current bucket (a hint: `None` does not mean empty).
    #[inline]
    pub fn peek_now(&self) -> Option<&T> {
        self.now.peek().map(|it| &it.v)
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(u64, T)> {
        loop {
            if let Some(it) = self.now.pop() {
                return Some((it.t, it.v));
            }
            if self.in_buckets == 0 {
                // nothing within the window: jump to the next later item's bucket
                let t = self.later.peek()?.t;
                self.cur = t / WIDTH * WIDTH;
            } else {
                self.cur += WIDTH;
            }
            let b = std::mem::take(&mut self.buckets[((self.cur / WIDTH) as usize) % BUCKETS]);
            self.in_buckets -= b.len();
            self.now.extend(b);
            // the window now ends one bucket later: move what falls in it
            while self.later.peek().is_some_and(|it| it.t < self.cur + SPAN) {
                let it = self.later.pop().expect("peeked");
                if it.t < self.cur + WIDTH {
                    self.now.push(it);
                } else {
                    self.buckets[((it.t / WIDTH) as usize) % BUCKETS].push(it);
                    self.in_buckets += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha8Rng;
    use rand_core::{RngCore, SeedableRng};

    /// Same order as one binary heap on (time, sequence), across buckets, window
    /// slides, jumps over empty stretches and pushes into the current bucket.
    #[test]
    fn pops_in_time_then_insertion_order() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut cal = Calendar::default();
        let mut reference = BinaryHeap::new();
        let mut seq = 0u64;
        let mut now = 0u64;
        let mut popped = 0;
        for round in 0..200_000u64 {
            if rng.next_u32() % 3 != 0 || reference.is_empty() {
                // ties at the same instant, the current bucket, the window, far later
                let dt = match rng.next_u32() % 5 {
                    0 => 0,
                    1 => rng.next_u64() % WIDTH,
                    2 => rng.next_u64() % SPAN,
                    3 => rng.next_u64() % (20 * SPAN),
                    _ => (rng.next_u64() % 4) * WIDTH,
                };
                seq += 1;
                cal.push(now + dt, (now + dt, seq));
                reference.push(Item { t: now + dt, seq, v: round });
            } else {
                let want = reference.pop().unwrap();
                let (t, (t2, s)) = cal.pop().unwrap();
                assert_eq!((t, t2, s), (want.t, want.t, want.seq));
                assert!(t >= now);
                now = t;
                popped += 1;
            }
        }
        while let Some(want) = reference.pop() {
            let (t, (_, s)) = cal.pop().unwrap();
            assert_eq!((t, s), (want.t, want.seq));
            popped += 1;
        }
        assert!(cal.pop().is_none());
        assert!(popped > 100_000, "{popped}");
    }
}

//! The worker's slots (its concurrency), shared by the topics it serves. While slots are free any topic
//! takes one; when they are scarce (every slot busy, topics waiting), a freed slot goes to a waiting
//! topic by the worker's [`SlotSharing`]: first come, first served; by weight (stride scheduling: each
//! topic's pass moves on by `1 / weight` per slot it gets, and the waiting topic with the lowest pass
//! goes next, so every waiting topic gets its share and none starves); or in strict order.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

/// How a worker shares its slots between its topics when they are scarce. See
/// [`WorkerBuilder::slot_sharing`](crate::WorkerBuilder::slot_sharing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SlotSharing {
    /// The topic that waited longest gets the next free slot (the default).
    #[default]
    FirstCome,
    /// In proportion to the topics' weights ([`WorkerBuilder::topic_weight`], default 1), among the
    /// topics that wait: with weights 3 and 1, three slots to one. No waiting topic starves.
    ///
    /// [`WorkerBuilder::topic_weight`]: crate::WorkerBuilder::topic_weight
    Weighted,
    /// The waiting topic of the highest weight always goes first (equal weights: first come). A topic
    /// waits as long as a heavier one has jobs for every slot.
    Strict,
}

/// The pass a topic of weight 1 moves on by per slot.
const STRIDE: u64 = 1 << 20;

/// A worker's slots.
#[derive(Debug)]
pub(crate) struct SlotPool {
    sharing: SlotSharing,
    /// The weight of each lane (a lane per topic; partitions of a topic share one).
    weights: Vec<u32>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    free: usize,
    /// Waiters per lane, each with its arrival number.
    queues: Vec<VecDeque<(u64, oneshot::Sender<Permit>)>>,
    /// Each lane's pass (weighted sharing).
    pass: Vec<u64>,
    /// The pass of the lane served last: a lane that starts waiting catches up to it (an idle lane
    /// does not bank slots).
    now_pass: u64,
    arrivals: u64,
}

/// One slot, given back when dropped.
#[derive(Debug)]
pub(crate) struct Permit(Option<Arc<SlotPool>>);

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(pool) = self.0.take() {
            SlotPool::release(&pool);
        }
    }
}

impl SlotPool {
    /// `slots` slots shared by lanes of these weights (each at least 1).
    pub(crate) fn new(slots: usize, sharing: SlotSharing, weights: Vec<u32>) -> Arc<Self> {
        let lanes = weights.len();
        Arc::new(SlotPool {
            sharing,
            weights: weights.into_iter().map(|w| w.max(1)).collect(),
            state: Mutex::new(State {
                free: slots,
                queues: (0..lanes).map(|_| VecDeque::new()).collect(),
                pass: vec![0; lanes],
                ..State::default()
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A free slot now, if there is one (then no lane waits).
    pub(crate) fn try_acquire(self: &Arc<Self>) -> Option<Permit> {
        let mut state = self.lock();
        if state.free == 0 {
            return None;
        }
        state.free -= 1;
        Some(Permit(Some(self.clone())))
    }

    /// A slot for `lane`, when the sharing gives it one.
    pub(crate) async fn acquire(self: &Arc<Self>, lane: usize) -> Permit {
        match self.wait_in_line(lane) {
            Ok(permit) => permit,
            // The sender goes only with the pool, which this waiter keeps alive.
            Err(rx) => rx.await.expect("the slot pool outlives its waiters"),
        }
    }

    /// A free slot for `lane`, or its place in line.
    fn wait_in_line(self: &Arc<Self>, lane: usize) -> Result<Permit, oneshot::Receiver<Permit>> {
        let mut state = self.lock();
        if state.free > 0 {
            state.free -= 1;
            return Ok(Permit(Some(self.clone())));
        }
        let (tx, rx) = oneshot::channel();
        if state.queues[lane].is_empty() {
            state.pass[lane] = state.pass[lane].max(state.now_pass);
        }
        state.arrivals += 1;
        let arrival = state.arrivals;
        state.queues[lane].push_back((arrival, tx));
        Err(rx)
    }

    /// How many wait for a slot, in every lane (a waiter that gave up counts until its turn comes).
    pub(crate) fn waiters(&self) -> usize {
        self.lock().queues.iter().map(VecDeque::len).sum()
    }

    /// A slot came back: to the lane the sharing picks, else free.
    fn release(self: &Arc<Self>) {
        loop {
            let tx = {
                let mut state = self.lock();
                let Some(lane) = self.next_lane(&state) else {
                    state.free += 1;
                    return;
                };
                if self.sharing == SlotSharing::Weighted {
                    state.now_pass = state.pass[lane];
                    state.pass[lane] += STRIDE / u64::from(self.weights[lane]);
                }
                state.queues[lane].pop_front().expect("a lane that waits").1
            };
            match tx.send(Permit(Some(self.clone()))) {
                Ok(()) => return,
                // Its waiter gave up (shutdown): the next one. The permit is disarmed first: its drop
                // would come back here.
                Err(mut permit) => drop(permit.0.take()),
            }
        }
    }

    /// The waiting lane that gets the next slot.
    fn next_lane(&self, state: &State) -> Option<usize> {
        let waiting = state
            .queues
            .iter()
            .enumerate()
            .filter(|(_, q)| !q.is_empty());
        let first = |(_, q): &(usize, &VecDeque<(u64, _)>)| q.front().map_or(u64::MAX, |w| w.0);
        match self.sharing {
            SlotSharing::FirstCome => waiting.min_by_key(|l| first(l)).map(|(i, _)| i),
            SlotSharing::Weighted => waiting
                .min_by_key(|l| (state.pass[l.0], first(l)))
                .map(|(i, _)| i),
            SlotSharing::Strict => waiting
                .min_by_key(|l| (std::cmp::Reverse(self.weights[l.0]), first(l)))
                .map(|(i, _)| i),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which lanes get the next `n` slots of a pool of one slot, when every lane always waits for one
    /// (a lane served joins the line again at once, as a busy topic does).
    fn serve(sharing: SlotSharing, weights: Vec<u32>, n: usize) -> Vec<usize> {
        let pool = SlotPool::new(1, sharing, weights.clone());
        let mut held = pool.try_acquire().expect("one free slot");
        let mut lines: Vec<_> = (0..weights.len())
            .map(|lane| pool.wait_in_line(lane).expect_err("no free slot"))
            .collect();
        let mut order = Vec::new();
        for _ in 0..n {
            drop(held);
            let (lane, permit) = lines
                .iter_mut()
                .enumerate()
                .find_map(|(lane, rx)| rx.try_recv().ok().map(|p| (lane, p)))
                .expect("a waiting lane got the slot");
            order.push(lane);
            held = permit;
            lines[lane] = pool.wait_in_line(lane).expect_err("no free slot");
        }
        order
    }

    #[test]
    fn weights_share_scarce_slots_and_none_starves() {
        let order = serve(SlotSharing::Weighted, vec![3, 1], 40);
        let b = order.iter().filter(|l| **l == 1).count();
        assert!((9..=11).contains(&b), "3 to 1: {b} of 40, {order:?}");
        let order = serve(SlotSharing::Weighted, vec![100, 1], 202);
        let b = order.iter().filter(|l| **l == 1).count();
        assert!(
            (1..=3).contains(&b),
            "weight 1 of 101 still gets its share: {b} of 202, {order:?}"
        );
    }

    #[test]
    fn strict_order_serves_the_heaviest_waiting_topic_first() {
        assert_eq!(serve(SlotSharing::Strict, vec![1, 5], 10), vec![1; 10]);
    }

    #[test]
    fn first_come_takes_turns() {
        assert_eq!(
            serve(SlotSharing::FirstCome, vec![3, 1], 6),
            vec![0, 1, 0, 1, 0, 1]
        );
    }

    #[test]
    fn a_waiter_that_gave_up_passes_its_slot_on() {
        let pool = SlotPool::new(1, SlotSharing::FirstCome, vec![1, 1]);
        let held = pool.try_acquire().unwrap();
        let gone = pool.wait_in_line(0).unwrap_err();
        let mut next = pool.wait_in_line(1).unwrap_err();
        drop(gone);
        drop(held);
        let permit = next.try_recv().expect("the slot went to the next waiter");
        drop(permit);
        assert!(pool.try_acquire().is_some(), "and came back free");
    }
}

//! The K send slots an import shares out among its prepared items, interactive ones first.
//!
//! Like a semaphore of K permits, with two waiting lines: a released slot goes to the longest-
//! waiting interactive item, and to a bulk item only when no interactive one waits. So a photo
//! dropped while a long import runs gets the next free slot, not the one after the lookahead.
//! Cancel-safe: a waiter dropped before or after being handed a slot gives it back.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

/// Slots to send calls, shared by the items in flight.
pub(crate) struct SendSlots {
    state: Mutex<SlotState>,
}

struct SlotState {
    free: usize,
    urgent: VecDeque<oneshot::Sender<SendSlot>>,
    bulk: VecDeque<oneshot::Sender<SendSlot>>,
}

/// One slot, given back when dropped.
pub(crate) struct SendSlot {
    slots: Option<Arc<SendSlots>>,
}

impl Drop for SendSlot {
    fn drop(&mut self) {
        if let Some(slots) = self.slots.take() {
            slots.release();
        }
    }
}

impl SendSlots {
    pub(crate) fn new(slots: usize) -> Arc<Self> {
        Arc::new(Self { state: Mutex::new(SlotState { free: slots, urgent: VecDeque::new(), bulk: VecDeque::new() }) })
    }

    /// Waits for a slot: behind earlier interactive waiters when `urgent`, behind every earlier
    /// waiter otherwise.
    pub(crate) async fn acquire(self: &Arc<Self>, urgent: bool) -> SendSlot {
        loop {
            let handed = {
                let mut state = self.lock();
                let ahead = !state.urgent.is_empty() || (!urgent && !state.bulk.is_empty());
                if state.free > 0 && !ahead {
                    state.free -= 1;
                    return SendSlot { slots: Some(self.clone()) };
                }
                let (tx, rx) = oneshot::channel();
                if urgent {
                    state.urgent.push_back(tx);
                } else {
                    state.bulk.push_back(tx);
                }
                rx
            };
            // The sender is dropped without a slot only if the slots are: wait in line again.
            if let Ok(slot) = handed.await {
                return slot;
            }
        }
    }

    /// Slots free right now (for tests and the driver's bookkeeping).
    #[cfg(test)]
    fn free(&self) -> usize {
        self.lock().free
    }

    fn release(self: &Arc<Self>) {
        loop {
            let waiter = {
                let mut state = self.lock();
                match state.urgent.pop_front().or_else(|| state.bulk.pop_front()) {
                    Some(waiter) => waiter,
                    None => {
                        state.free += 1;
                        return;
                    }
                }
            };
            // Outside the lock: a slot that comes back (its waiter is gone) must not re-enter it.
            match waiter.send(SendSlot { slots: Some(self.clone()) }) {
                Ok(()) => return,
                Err(mut unwanted) => unwanted.slots = None,
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_released_slot_goes_to_the_interactive_waiter_first() {
        let slots = SendSlots::new(1);
        let held = slots.acquire(false).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut waiters = Vec::new();
        for (name, urgent) in [("bulk-1", false), ("bulk-2", false), ("drop", true)] {
            let (slots, order) = (slots.clone(), order.clone());
            waiters.push(tokio::spawn(async move {
                let slot = slots.acquire(urgent).await;
                order.lock().unwrap().push(name);
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(slot);
            }));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(held);
        for w in waiters {
            w.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ["drop", "bulk-1", "bulk-2"]);
        assert_eq!(slots.free(), 1);
    }

    #[tokio::test]
    async fn a_waiter_that_gives_up_loses_no_slot() {
        let slots = SendSlots::new(1);
        let held = slots.acquire(false).await;
        let gave_up = tokio::time::timeout(Duration::from_millis(10), slots.acquire(true)).await;
        assert!(gave_up.is_err());
        drop(held);
        assert_eq!(slots.free(), 1, "the abandoned waiter's turn came back");
        let again = slots.acquire(false).await;
        assert_eq!(slots.free(), 0);
        drop(again);
        assert_eq!(slots.free(), 1);
    }
}

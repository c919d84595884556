//! Cross-shard mailboxes: one single-producer single-consumer ring (rtrb) per ordered pair of
//! shards, plus a doorbell per pair so that an idle shard sleeps instead of spinning.
//!
//! Runs on every shard; each `Mesh` is touched by its own shard's executor only. Messages are
//! moved, never copied: payloads carry `bytes::Bytes`, so a forwarded record batch is a
//! reference count, not a memcpy.
//!
//! Why a doorbell: rtrb has no wake-up of its own. The doorbell is a glommio shared channel of
//! capacity one, used only to wake the receiving executor. A sender rings it after every push;
//! when it is already full a wake-up is pending and the receiver drains the ring after that
//! wake-up, so ringing again would only cost an eventfd write. The receiver drains the ring
//! until it is empty after each wake-up, so no message is left behind.
//!
//! Bounds: `RING_CAPACITY` messages in flight per ordered pair. When a ring is full the message
//! waits in a per-target overflow queue (kept in FIFO order with the ring) that a drainer task
//! moves into the ring as space frees up; a send never fails and never reorders.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use glommio::channels::shared_channel::{
    self, ConnectedReceiver, ConnectedSender, SharedReceiver, SharedSender,
};

/// Messages in flight per ordered pair of shards before overflow queueing starts.
pub const RING_CAPACITY: usize = 4096;

/// How long the overflow drainer waits before retrying a full ring.
const OVERFLOW_RETRY: Duration = Duration::from_micros(100);

/// One shard's ends of the mesh, before its executor has started: `Send`, so it can be moved
/// into the shard's thread.
pub struct MeshEndpoint<T: Send + 'static> {
    id: usize,
    outbound: Vec<Option<(rtrb::Producer<T>, SharedSender<()>)>>,
    inbound: Vec<Option<(rtrb::Consumer<T>, SharedReceiver<()>)>>,
}

/// Builds the full mesh for `shards` shards: element `i` of the result belongs to shard `i`.
pub fn build<T: Send + 'static>(shards: usize) -> Vec<MeshEndpoint<T>> {
    let mut endpoints: Vec<MeshEndpoint<T>> = (0..shards)
        .map(|id| MeshEndpoint {
            id,
            outbound: (0..shards).map(|_| None).collect(),
            inbound: (0..shards).map(|_| None).collect(),
        })
        .collect();
    for source in 0..shards {
        for target in 0..shards {
            if source == target {
                continue;
            }
            let (producer, consumer) = rtrb::RingBuffer::new(RING_CAPACITY);
            let (bell_sender, bell_receiver) = shared_channel::new_bounded(1);
            endpoints[source].outbound[target] = Some((producer, bell_sender));
            endpoints[target].inbound[source] = Some((consumer, bell_receiver));
        }
    }
    endpoints
}

impl<T: Send + 'static> MeshEndpoint<T> {
    pub fn id(&self) -> usize {
        self.id
    }

    /// Connects the doorbells on the current executor (must be the shard's own) and starts one
    /// receiver task per inbound pair, each handing messages to `deliver(source, message)`.
    pub async fn connect(self, deliver: Rc<dyn Fn(usize, T)>) -> Rc<Mesh<T>> {
        // Each connect waits for the peer shard to connect its end, so every end of this
        // shard is connected concurrently: connecting them one by one deadlocks two shards
        // that each wait on the other's first end.
        let senders = futures::future::join_all(self.outbound.into_iter().map(|slot| async move {
            match slot {
                Some((producer, bell)) => Some(Outbox {
                    producer: RefCell::new(producer),
                    overflow: RefCell::new(VecDeque::new()),
                    bell: bell.connect().await,
                }),
                None => None,
            }
        }));
        let receivers =
            futures::future::join_all(self.inbound.into_iter().map(|slot| async move {
                match slot {
                    Some((consumer, bell)) => Some((consumer, bell.connect().await)),
                    None => None,
                }
            }));
        let (outbound, inbound) = futures::future::join(senders, receivers).await;
        let mesh = Rc::new(Mesh {
            id: self.id,
            outbound,
            overflow_waiting: event_listener::Event::new(),
        });
        for (source, slot) in inbound.into_iter().enumerate() {
            if let Some((consumer, bell)) = slot {
                glommio::spawn_local(receive_loop(source, consumer, bell, deliver.clone()))
                    .detach();
            }
        }
        glommio::spawn_local(drain_overflow(Rc::downgrade(&mesh))).detach();
        mesh
    }
}

struct Outbox<T: Send + 'static> {
    producer: RefCell<rtrb::Producer<T>>,
    overflow: RefCell<VecDeque<T>>,
    bell: ConnectedSender<()>,
}

/// A shard's connected view of the mesh.
pub struct Mesh<T: Send + 'static> {
    id: usize,
    outbound: Vec<Option<Outbox<T>>>,
    overflow_waiting: event_listener::Event,
}

impl<T: Send + 'static> Mesh<T> {
    /// This shard's index.
    pub fn id(&self) -> usize {
        self.id
    }

    /// Number of shards in the mesh.
    pub fn shard_count(&self) -> usize {
        self.outbound.len()
    }

    /// Sends `message` to shard `target`, in FIFO order with every earlier send to it.
    ///
    /// Sending to oneself is a programmer error: local work is done locally.
    pub fn send(&self, target: usize, message: T) {
        let outbox = self.outbound[target]
            .as_ref()
            .expect("mesh send to self or unknown shard");
        let mut overflow = outbox.overflow.borrow_mut();
        if overflow.is_empty() {
            match outbox.producer.borrow_mut().push(message) {
                Ok(()) => {
                    // A full doorbell means a wake-up is already pending.
                    let _ = outbox.bell.try_send(());
                    return;
                }
                Err(rtrb::PushError::Full(message)) => overflow.push_back(message),
            }
        } else {
            overflow.push_back(message);
        }
        self.overflow_waiting.notify(1);
    }

    /// Moves overflowed messages into their rings; true when nothing is left waiting.
    fn flush_overflow(&self) -> bool {
        let mut all_flushed = true;
        for outbox in self.outbound.iter().flatten() {
            let mut overflow = outbox.overflow.borrow_mut();
            let mut pushed = false;
            let mut producer = outbox.producer.borrow_mut();
            while let Some(message) = overflow.pop_front() {
                match producer.push(message) {
                    Ok(()) => pushed = true,
                    Err(rtrb::PushError::Full(message)) => {
                        overflow.push_front(message);
                        all_flushed = false;
                        break;
                    }
                }
            }
            if pushed {
                let _ = outbox.bell.try_send(());
            }
        }
        all_flushed
    }

    fn has_overflow(&self) -> bool {
        self.outbound
            .iter()
            .flatten()
            .any(|outbox| !outbox.overflow.borrow().is_empty())
    }
}

async fn receive_loop<T: Send + 'static>(
    source: usize,
    mut consumer: rtrb::Consumer<T>,
    bell: ConnectedReceiver<()>,
    deliver: Rc<dyn Fn(usize, T)>,
) {
    loop {
        while let Ok(message) = consumer.pop() {
            deliver(source, message);
        }
        if bell.recv().await.is_none() {
            // The peer shard has gone: deliver what it left, then stop.
            while let Ok(message) = consumer.pop() {
                deliver(source, message);
            }
            return;
        }
    }
}

async fn drain_overflow<T: Send + 'static>(mesh: std::rc::Weak<Mesh<T>>) {
    loop {
        let listener = {
            let Some(mesh) = mesh.upgrade() else { return };
            let listener = mesh.overflow_waiting.listen();
            if mesh.has_overflow() {
                drop(listener);
                if !mesh.flush_overflow() {
                    drop(mesh);
                    glommio::timer::sleep(OVERFLOW_RETRY).await;
                }
                continue;
            }
            listener
        };
        listener.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// Two shards on two executors send each other numbered messages, more than a ring holds,
    /// and each receives all of them in order.
    #[test]
    fn messages_cross_shards_in_order() {
        const COUNT: u64 = (RING_CAPACITY as u64) * 3;
        let endpoints = build::<u64>(2);
        type Received = Arc<Mutex<Vec<Vec<(usize, u64)>>>>;
        let received: Received = Arc::new(Mutex::new(vec![vec![], vec![]]));
        let mut threads = Vec::new();
        for endpoint in endpoints {
            let received = received.clone();
            threads.push(
                glommio::LocalExecutorBuilder::default()
                    .spawn(move || async move {
                        let id = endpoint.id();
                        let got = Rc::new(RefCell::new(Vec::new()));
                        let sink = got.clone();
                        let mesh = endpoint
                            .connect(Rc::new(move |from, value| {
                                sink.borrow_mut().push((from, value))
                            }))
                            .await;
                        for value in 0..COUNT {
                            mesh.send(1 - id, value);
                        }
                        let deadline = std::time::Instant::now() + Duration::from_secs(20);
                        while got.borrow().len() < COUNT as usize
                            && std::time::Instant::now() < deadline
                        {
                            glommio::timer::sleep(Duration::from_millis(1)).await;
                        }
                        // Keep this shard's rings alive until the peer has drained them.
                        glommio::timer::sleep(Duration::from_millis(200)).await;
                        received.lock().unwrap()[id] = got.borrow().clone();
                    })
                    .unwrap(),
            );
        }
        for thread in threads {
            thread.join().unwrap();
        }
        let received = received.lock().unwrap();
        for (id, got) in received.iter().enumerate() {
            let expected: Vec<(usize, u64)> = (0..COUNT).map(|value| (1 - id, value)).collect();
            assert_eq!(got, &expected, "shard {id}");
        }
    }
}

//! Cross-shard mailboxes: for each ordered pair of shards, one single-producer single-consumer
//! ring (rtrb) of calls and one of replies, each with a doorbell so that an idle shard sleeps
//! instead of spinning.
//!
//! Runs on every shard; each `Mesh` is touched by its own shard's executor only. Messages are
//! moved, never copied: payloads carry `bytes::Bytes`, so a forwarded record batch is a
//! reference count, not a memcpy.
//!
//! Why a doorbell: rtrb has no wake-up of its own. The doorbell is a glommio shared channel of
//! capacity one, used only to wake the receiving executor. A sender rings it after every push;
//! when it is already full a wake-up is pending and the receiver drains the ring after that
//! wake-up, so ringing again would only cost an eventfd write. The receiver drains the ring
//! until it is empty after each wake-up (or until it may run no more calls), so no message is
//! left behind.
//!
//! Bounds, end to end:
//! - `RING_CAPACITY` calls and `RING_CAPACITY` replies in flight per ordered pair. A full ring
//!   pushes back on the sender: the sending task waits (in FIFO order with the pair's other
//!   waiting senders, so order is kept) until the receiver makes room. There is no overflow
//!   queue: a waiting message stays in the task that sends it, which does not go on.
//! - The receiver runs at most `MAX_CALLS_RUNNING` calls at once, and parks at most
//!   `MAX_CALLS_PARKED` calls that wait for an event (long polls, group rebalances); beyond
//!   that it stops taking calls off its rings, which then fill and push back on the senders.
//!
//! Why two shards calling each other with full rings do not deadlock: replies never wait
//! behind calls. They travel on their own ring, and the receiver takes every reply off it at
//! once, without waiting for anything (`Inbox::reply` only hands the reply to the task
//! awaiting it). So a call that has run can always deliver its reply: its push waits, at
//! worst, for the peer's reply receiver, which waits for nothing. A running call therefore
//! ends, frees its slot, and the receiver takes the next call. (Calls that themselves call
//! other shards, the metadata core publishing an image, wait for replies, which always come,
//! and for the peer's own leaf calls, which end likewise.)

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

use futures::future::LocalBoxFuture;
use glommio::channels::shared_channel::{
    self, ConnectedReceiver, ConnectedSender, SharedReceiver, SharedSender,
};

/// Messages in flight per ring (one ring of calls and one of replies per ordered pair of
/// shards) before senders wait.
pub const RING_CAPACITY: usize = 4096;

/// Calls a shard runs at once for other shards (across all its inbound rings). Each running
/// call holds its request's memory and, for a produce or a fetch, a disk operation.
pub const MAX_CALLS_RUNNING: usize = 1024;

/// Calls a shard keeps parked for other shards at once: calls that wait for an event rather
/// than work (a long poll, a group member waiting for its rebalance). Each costs a task and a
/// listener, a few hundred bytes.
pub const MAX_CALLS_PARKED: usize = 16_384;

/// How often a sender waiting for room on a full ring looks again. The room is made on
/// another core, which has no cheap way to wake this one; the wait only happens under
/// saturation (a full ring is `RING_CAPACITY` messages behind).
const SEND_RETRY: Duration = Duration::from_micros(100);

/// What the receiving shard makes of a call.
pub enum Work {
    /// Handled already (nothing runs on).
    Done,
    /// Work to run, holding one of the `MAX_CALLS_RUNNING` slots until it ends (its reply
    /// sent).
    Run(LocalBoxFuture<'static, ()>),
    /// A wait for an event, holding one of the `MAX_CALLS_PARKED` slots until it ends.
    Park(LocalBoxFuture<'static, ()>),
}

/// The receiving side of a shard: what it does with the messages other shards send it.
pub trait Inbox<T, R> {
    /// A call from shard `source`: handled at once, or work to run. Called in arrival order.
    fn call(&self, source: usize, message: T) -> Work;
    /// A reply from shard `source`. Must not wait for anything: the deadlock freedom of the
    /// mesh rests on replies always being taken (see the module docs).
    fn reply(&self, source: usize, reply: R);
}

type Ends<T> = (rtrb::Producer<T>, SharedSender<()>);
type InEnds<T> = (rtrb::Consumer<T>, SharedReceiver<()>);

/// One shard's ends of the mesh, before its executor has started: `Send`, so it can be moved
/// into the shard's thread.
pub struct MeshEndpoint<T: Send + 'static, R: Send + 'static> {
    id: usize,
    calls_out: Vec<Option<Ends<T>>>,
    replies_out: Vec<Option<Ends<R>>>,
    calls_in: Vec<Option<InEnds<T>>>,
    replies_in: Vec<Option<InEnds<R>>>,
}

/// Builds the full mesh for `shards` shards: element `i` of the result belongs to shard `i`.
pub fn build<T: Send + 'static, R: Send + 'static>(shards: usize) -> Vec<MeshEndpoint<T, R>> {
    let mut endpoints: Vec<MeshEndpoint<T, R>> = (0..shards)
        .map(|id| MeshEndpoint {
            id,
            calls_out: (0..shards).map(|_| None).collect(),
            replies_out: (0..shards).map(|_| None).collect(),
            calls_in: (0..shards).map(|_| None).collect(),
            replies_in: (0..shards).map(|_| None).collect(),
        })
        .collect();
    for source in 0..shards {
        for target in 0..shards {
            if source == target {
                continue;
            }
            let (producer, consumer) = rtrb::RingBuffer::new(RING_CAPACITY);
            let (bell_sender, bell_receiver) = shared_channel::new_bounded(1);
            endpoints[source].calls_out[target] = Some((producer, bell_sender));
            endpoints[target].calls_in[source] = Some((consumer, bell_receiver));
            let (producer, consumer) = rtrb::RingBuffer::new(RING_CAPACITY);
            let (bell_sender, bell_receiver) = shared_channel::new_bounded(1);
            endpoints[source].replies_out[target] = Some((producer, bell_sender));
            endpoints[target].replies_in[source] = Some((consumer, bell_receiver));
        }
    }
    endpoints
}

async fn connect_out<T: Send + 'static>(slots: Vec<Option<Ends<T>>>) -> Vec<Option<Outbox<T>>> {
    futures::future::join_all(slots.into_iter().map(|slot| async move {
        match slot {
            Some((producer, bell)) => Some(Outbox {
                producer: RefCell::new(producer),
                bell: bell.connect().await,
                waiting: RefCell::new(VecDeque::new()),
                next_ticket: Cell::new(0),
            }),
            None => None,
        }
    }))
    .await
}

type ConnectedIn<T> = (rtrb::Consumer<T>, ConnectedReceiver<()>);

async fn connect_in<T: Send + 'static>(
    slots: Vec<Option<InEnds<T>>>,
) -> Vec<Option<ConnectedIn<T>>> {
    futures::future::join_all(slots.into_iter().map(|slot| async move {
        match slot {
            Some((consumer, bell)) => Some((consumer, bell.connect().await)),
            None => None,
        }
    }))
    .await
}

impl<T: Send + 'static, R: Send + 'static> MeshEndpoint<T, R> {
    pub fn id(&self) -> usize {
        self.id
    }

    /// Connects the doorbells on the current executor (must be the shard's own) and starts,
    /// per inbound pair, one task taking calls and one taking replies, both handing them to
    /// `inbox`.
    pub async fn connect(self, inbox: Rc<dyn Inbox<T, R>>) -> Rc<Mesh<T, R>> {
        // Each connect waits for the peer shard to connect its end, so every end of this
        // shard is connected concurrently: connecting them one by one deadlocks two shards
        // that each wait on the other's first end.
        let (calls, replies, calls_in, replies_in) = futures::future::join4(
            connect_out(self.calls_out),
            connect_out(self.replies_out),
            connect_in(self.calls_in),
            connect_in(self.replies_in),
        )
        .await;
        let mesh = Rc::new(Mesh {
            id: self.id,
            calls,
            replies,
        });
        let slots = Rc::new(Slots {
            running: Rc::new(glommio::sync::Semaphore::new(MAX_CALLS_RUNNING as u64)),
            parked: Rc::new(glommio::sync::Semaphore::new(MAX_CALLS_PARKED as u64)),
        });
        for (source, slot) in calls_in.into_iter().enumerate() {
            if let Some((consumer, bell)) = slot {
                let task = receive_calls(source, consumer, bell, inbox.clone(), slots.clone());
                glommio::spawn_local(task).detach();
            }
        }
        for (source, slot) in replies_in.into_iter().enumerate() {
            if let Some((consumer, bell)) = slot {
                glommio::spawn_local(receive_replies(source, consumer, bell, inbox.clone()))
                    .detach();
            }
        }
        mesh
    }
}

/// The sending end of one ring.
struct Outbox<T: Send + 'static> {
    producer: RefCell<rtrb::Producer<T>>,
    bell: ConnectedSender<()>,
    /// Senders waiting for room, oldest first: each a ticket and the event that tells it it
    /// is at the front. Only the front one retries the ring, so order is kept.
    waiting: RefCell<VecDeque<(u64, Rc<event_listener::Event>)>>,
    next_ticket: Cell<u64>,
}

impl<T: Send + 'static> Outbox<T> {
    fn push(&self, message: T) -> Result<(), T> {
        match self.producer.borrow_mut().push(message) {
            Ok(()) => {
                // A full doorbell means a wake-up is already pending.
                let _ = self.bell.try_send(());
                Ok(())
            }
            Err(rtrb::PushError::Full(message)) => Err(message),
        }
    }

    /// Pushes `message`, waiting for room (behind earlier waiting senders) when the ring is
    /// full. The place in line is taken at the first poll.
    async fn send(&self, message: T) {
        let message = if self.waiting.borrow().is_empty() {
            match self.push(message) {
                Ok(()) => return,
                Err(message) => message,
            }
        } else {
            message
        };
        let ticket = self.next_ticket.get();
        self.next_ticket.set(ticket + 1);
        let turn = Rc::new(event_listener::Event::new());
        self.waiting.borrow_mut().push_back((ticket, turn.clone()));
        let _place = InLine {
            outbox: self,
            ticket,
        };
        let mut message = message;
        loop {
            let at_front = self.waiting.borrow().front().map(|(t, _)| *t) == Some(ticket);
            if at_front {
                match self.push(message) {
                    Ok(()) => return,
                    Err(back) => message = back,
                }
                glommio::timer::sleep(SEND_RETRY).await;
            } else {
                let listener = turn.listen();
                if self.waiting.borrow().front().map(|(t, _)| *t) != Some(ticket) {
                    listener.await;
                }
            }
        }
    }
}

/// A sender's place in line for a full ring; leaving (sent, or the sender dropped) hands the
/// front to the next in line.
struct InLine<'a, T: Send + 'static> {
    outbox: &'a Outbox<T>,
    ticket: u64,
}

impl<T: Send + 'static> Drop for InLine<'_, T> {
    fn drop(&mut self) {
        let mut waiting = self.outbox.waiting.borrow_mut();
        if let Some(at) = waiting.iter().position(|(t, _)| *t == self.ticket) {
            waiting.remove(at);
        }
        if let Some((_, next)) = waiting.front() {
            next.notify(1);
        }
    }
}

/// A shard's connected view of the mesh.
pub struct Mesh<T: Send + 'static, R: Send + 'static> {
    id: usize,
    calls: Vec<Option<Outbox<T>>>,
    replies: Vec<Option<Outbox<R>>>,
}

impl<T: Send + 'static, R: Send + 'static> Mesh<T, R> {
    /// This shard's index.
    pub fn id(&self) -> usize {
        self.id
    }

    /// Number of shards in the mesh.
    pub fn shard_count(&self) -> usize {
        self.calls.len()
    }

    /// Sends call `message` to shard `target`, in FIFO order with every earlier call to it:
    /// its place is taken at the first poll (on the ring, or in line for it when full), so
    /// two sends started in order arrive in order. Waits while the ring is full.
    ///
    /// Sending to oneself is a programmer error: local work is done locally.
    pub async fn send(&self, target: usize, message: T) {
        let outbox = self.calls[target]
            .as_ref()
            .expect("mesh send to self or unknown shard");
        outbox.send(message).await
    }

    /// Sends `reply` to shard `target` on the pair's reply ring. Waits only while that ring
    /// is full, which the peer's reply receiver, waiting for nothing, soon changes.
    pub async fn reply(&self, target: usize, reply: R) {
        let outbox = self.replies[target]
            .as_ref()
            .expect("mesh reply to self or unknown shard");
        outbox.send(reply).await
    }
}

/// Run slots shared by a shard's inbound call rings.
struct Slots {
    running: Rc<glommio::sync::Semaphore>,
    parked: Rc<glommio::sync::Semaphore>,
}

async fn receive_calls<T: Send + 'static, R: Send + 'static>(
    source: usize,
    mut consumer: rtrb::Consumer<T>,
    bell: ConnectedReceiver<()>,
    inbox: Rc<dyn Inbox<T, R>>,
    slots: Rc<Slots>,
) {
    loop {
        while let Ok(message) = consumer.pop() {
            // Handed over in arrival order; the work is spawned in that order too, so each
            // runs its synchronous prefix (a produce's append) in arrival order.
            let (work, semaphore) = match inbox.call(source, message) {
                Work::Done => continue,
                Work::Run(work) => (work, &slots.running),
                Work::Park(work) => (work, &slots.parked),
            };
            // While every slot is taken, the rest stays on the ring (back-pressure).
            let Ok(slot) = semaphore.acquire_static_permit(1).await else {
                return;
            };
            glommio::spawn_local(async move {
                work.await;
                drop(slot);
            })
            .detach();
        }
        if bell.recv().await.is_none() {
            // The peer shard has gone: take what it left, then stop.
            while let Ok(message) = consumer.pop() {
                if let Work::Run(work) | Work::Park(work) = inbox.call(source, message) {
                    glommio::spawn_local(work).detach();
                }
            }
            return;
        }
    }
}

async fn receive_replies<T: Send + 'static, R: Send + 'static>(
    source: usize,
    mut consumer: rtrb::Consumer<R>,
    bell: ConnectedReceiver<()>,
    inbox: Rc<dyn Inbox<T, R>>,
) {
    loop {
        while let Ok(reply) = consumer.pop() {
            inbox.reply(source, reply);
        }
        if bell.recv().await.is_none() {
            while let Ok(reply) = consumer.pop() {
                inbox.reply(source, reply);
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests;

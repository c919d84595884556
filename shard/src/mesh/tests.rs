//! The mesh between two real executors (threads): order, back-pressure and replies under
//! full rings.

use super::*;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Test calls: a number, and whether the receiver should answer it.
type Msg = (u64, bool);

/// Records calls and replies, runs each call as work that (if asked) replies, and can hold
/// every call running until released.
struct Recorder {
    calls: RefCell<Vec<(usize, u64)>>,
    replies: RefCell<Vec<(usize, u64)>>,
    mesh: RefCell<Option<Rc<Mesh<Msg, u64>>>>,
    running: Cell<usize>,
    most_running: Cell<usize>,
    hold: Cell<bool>,
    released: event_listener::Event,
}

impl Recorder {
    fn new(hold: bool) -> Rc<Recorder> {
        Rc::new(Recorder {
            calls: RefCell::new(Vec::new()),
            replies: RefCell::new(Vec::new()),
            mesh: RefCell::new(None),
            running: Cell::new(0),
            most_running: Cell::new(0),
            hold: Cell::new(hold),
            released: event_listener::Event::new(),
        })
    }
}

struct Inboxed(Rc<Recorder>);

impl Inbox<Msg, u64> for Inboxed {
    fn call(&self, source: usize, (value, answer): Msg) -> Work {
        self.0.calls.borrow_mut().push((source, value));
        let recorder = self.0.clone();
        Work::Run(Box::pin(async move {
            recorder.running.set(recorder.running.get() + 1);
            let most = recorder.most_running.get().max(recorder.running.get());
            recorder.most_running.set(most);
            while recorder.hold.get() {
                let listener = recorder.released.listen();
                if recorder.hold.get() {
                    listener.await;
                }
            }
            recorder.running.set(recorder.running.get() - 1);
            if answer {
                // Calls may arrive before `connect` has returned the mesh to the test.
                let mesh = loop {
                    if let Some(mesh) = recorder.mesh.borrow().clone() {
                        break mesh;
                    }
                    glommio::timer::sleep(Duration::from_millis(1)).await;
                };
                mesh.reply(source, value).await;
            }
        }))
    }

    fn reply(&self, source: usize, reply: u64) {
        self.0.replies.borrow_mut().push((source, reply));
    }
}

async fn wait_until(deadline: Instant, done: impl Fn() -> bool) {
    while !done() && Instant::now() < deadline {
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
}

/// Two shards on two executors each send the other more calls than a ring and the running
/// slots hold, every call answered: each receives all calls in order and all replies, so
/// two shards calling each other with full rings do not deadlock.
#[test]
fn full_rings_both_ways_deliver_everything_in_order() {
    const COUNT: u64 = (RING_CAPACITY * 3 + MAX_CALLS_RUNNING) as u64;
    let endpoints = build::<Msg, u64>(2);
    type Seen = Arc<Mutex<Vec<(Vec<(usize, u64)>, Vec<(usize, u64)>)>>>;
    let seen: Seen = Arc::new(Mutex::new(vec![Default::default(), Default::default()]));
    let mut threads = Vec::new();
    for endpoint in endpoints {
        let seen = seen.clone();
        threads.push(
            glommio::LocalExecutorBuilder::default()
                .spawn(move || async move {
                    let id = endpoint.id();
                    let recorder = Recorder::new(false);
                    let mesh = endpoint.connect(Rc::new(Inboxed(recorder.clone()))).await;
                    *recorder.mesh.borrow_mut() = Some(mesh.clone());
                    for value in 0..COUNT {
                        mesh.send(1 - id, (value, true)).await;
                    }
                    let deadline = Instant::now() + Duration::from_secs(30);
                    wait_until(deadline, || {
                        recorder.calls.borrow().len() as u64 >= COUNT
                            && recorder.replies.borrow().len() as u64 >= COUNT
                    })
                    .await;
                    // Keep this shard's rings alive until the peer has drained them.
                    glommio::timer::sleep(Duration::from_millis(200)).await;
                    seen.lock().unwrap()[id] = (
                        recorder.calls.borrow().clone(),
                        recorder.replies.borrow().clone(),
                    );
                })
                .unwrap(),
        );
    }
    for thread in threads {
        thread.join().unwrap();
    }
    let seen = seen.lock().unwrap();
    for (id, (calls, replies)) in seen.iter().enumerate() {
        let expected: Vec<(usize, u64)> = (0..COUNT).map(|value| (1 - id, value)).collect();
        assert_eq!(calls, &expected, "calls received by shard {id}");
        assert_eq!(
            replies.len(),
            expected.len(),
            "replies received by shard {id}"
        );
    }
}

/// A receiver whose calls never end runs `MAX_CALLS_RUNNING` of them and takes one more off
/// the ring; the ring then fills and the sender waits: no more than that is ever accepted.
/// Once the calls end, everything sent arrives, in order.
#[test]
fn a_busy_receiver_pushes_back_on_the_sender() {
    const BOUND: usize = MAX_CALLS_RUNNING + 1 + RING_CAPACITY;
    const COUNT: u64 = BOUND as u64 + 100;
    let endpoints = build::<Msg, u64>(2);
    let (release_send, release_recv) = std::sync::mpsc::channel::<()>();
    let (accepted_send, accepted_recv) = std::sync::mpsc::channel::<u64>();
    // (most calls running at once, calls received) on the receiver.
    type Observed = Arc<Mutex<(usize, Vec<(usize, u64)>)>>;
    let result: Observed = Arc::default();
    let mut handles = Vec::new();
    let mut release = Some(release_recv);
    for endpoint in endpoints {
        let id = endpoint.id();
        let accepted_send = accepted_send.clone();
        let result = result.clone();
        let release = if id == 1 { release.take() } else { None };
        handles.push(
            glommio::LocalExecutorBuilder::default()
                .spawn(move || async move {
                    let recorder = Recorder::new(true);
                    let mesh = endpoint.connect(Rc::new(Inboxed(recorder.clone()))).await;
                    if id == 0 {
                        // The sender: count the sends that complete before it is held up.
                        let sent = Rc::new(Cell::new(0u64));
                        let counter = sent.clone();
                        let sender = mesh.clone();
                        let task = glommio::spawn_local(async move {
                            for value in 0..COUNT {
                                sender.send(1, (value, false)).await;
                                counter.set(value + 1);
                            }
                        });
                        let mut last = u64::MAX;
                        // Settled: no progress for a second (long, so that a slow or
                        // starved receiver thread is not mistaken for a bound).
                        while sent.get() != last {
                            last = sent.get();
                            glommio::timer::sleep(Duration::from_secs(1)).await;
                        }
                        accepted_send.send(sent.get()).unwrap();
                        task.await;
                        glommio::timer::sleep(Duration::from_millis(500)).await;
                    } else {
                        let release = release.unwrap();
                        wait_until(Instant::now() + Duration::from_secs(30), || {
                            release.try_recv().is_ok()
                        })
                        .await;
                        let most = recorder.most_running.get();
                        recorder.hold.set(false);
                        recorder.released.notify(usize::MAX);
                        wait_until(Instant::now() + Duration::from_secs(30), || {
                            recorder.calls.borrow().len() as u64 >= COUNT
                        })
                        .await;
                        *result.lock().unwrap() = (most, recorder.calls.borrow().clone());
                    }
                })
                .unwrap(),
        );
    }
    let accepted = accepted_recv
        .recv_timeout(Duration::from_secs(30))
        .expect("the sender settles");
    release_send.send(()).unwrap();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(
        accepted, BOUND as u64,
        "sends accepted before the sender waits"
    );
    let (most, calls) = result.lock().unwrap().clone();
    assert_eq!(most, MAX_CALLS_RUNNING, "calls running at once");
    let expected: Vec<(usize, u64)> = (0..COUNT).map(|value| (0, value)).collect();
    assert_eq!(calls, expected);
}

//! Start-up and shutdown: start one glommio executor per shard pinned to its core (shard 0,
//! the metadata core, first: it opens the metadata log and hands the replayed image to the
//! others), connect the mesh, open each shard's partitions, and once every shard has
//! opened its own (Kafka finishes log recovery before its socket server accepts), listen on
//! every listener's port with SO_REUSEPORT on every shard (the kernel spreads connections;
//! SSL listeners handshake first, see `tls`); on
//! SIGTERM/SIGINT close every log cleanly and print each shard's counters.

use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use glommio::net::TcpListener;
use glommio::{LocalExecutorBuilder, Placement};

use crate::config::BrokerConfig;
use crate::forward::{ShardMsg, ShardReply};
use crate::limits::{ConnectionLimits, RefusalLog};
use crate::metadata::image::Image;
use crate::metadata::{self, Controller};
use crate::shard::Shard;

pub(crate) static STOP: AtomicBool = AtomicBool::new(false);
/// A stop signal arrived (a cluster node does its controlled shutdown before `STOP`).
static SIGNALLED: AtomicBool = AtomicBool::new(false);
/// Set once at start for a node of a multi-node cluster.
static CLUSTER_MODE: AtomicBool = AtomicBool::new(false);

/// How often shards look at the stop flag (a signal handler may only set an atomic). Each
/// look wakes an idle shard (a park and a wake, a membarrier): at 50 ms this was the largest
/// share of an idle broker's CPU (20 wakes a second per listener and shard); shutdown may
/// start this much later.
pub(crate) const STOP_POLL: Duration = Duration::from_millis(250);
/// How long a broker-only node waits for its first committed image before its shards start
/// (they start from it, so partitions it leads open before it listens; later images follow).
const OBSERVER_FIRST_IMAGE_WAIT: Duration = Duration::from_secs(5);
/// The log cleaner's share of a shard's CPU when other work is waiting (the default queue
/// has 1000): it runs at full speed only on an otherwise idle core.
const CLEANER_SHARES: usize = 50;
/// Floor of one shard's key map, whatever the split of `log.cleaner.dedupe.buffer.size`.
const CLEANER_MIN_MAP_BYTES: usize = 1 << 20;

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
    if !CLUSTER_MODE.load(Ordering::SeqCst) {
        STOP.store(true, Ordering::SeqCst);
    }
}

fn install_signal_handlers() {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(
                signal,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
}

pub fn run(mut config: BrokerConfig) -> anyhow::Result<()> {
    // A controller-only node runs the quorum voter and one shard, the metadata core that
    // executes the admin requests brokers forward to it, with no broker listener (see
    // ARCHITECTURE.md, "Running as a cluster"). A broker-only node follows the quorum as an
    // observer.
    let controller_only = config.quorum.kraft && !config.quorum.roles.is_broker();
    if controller_only && !config.listeners.is_empty() {
        // config::quorum refuses it already (Kafka's rule); kept as the invariant here.
        return Err(anyhow!(
            "process.roles=controller: `listeners` must hold only controller listeners"
        ));
    }
    let data_dir = resolve_data_dir(&mut config)?;
    tracing::info!(data_dir = %data_dir.display(), "data directory");
    // Held until the process exits: two brokers on one data directory would corrupt it.
    let _data_dir_lock = lock_data_dir(&data_dir)?;
    // Before any partition opens: a deletion a crash interrupted is finished, never undone.
    shard::log::dir::remove_deleted_dirs(&data_dir)
        .with_context(|| format!("removing deleted partitions in {}", data_dir.display()))?;
    let cpus = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let shard_count = if controller_only {
        1 // the metadata core only
    } else if config.num_shards == 0 {
        cpus
    } else {
        usize::from(config.num_shards)
    };
    // `metadata.log.dir`, else the data directory (Kafka's rule). One apart from the data
    // directory is locked the same way (Kafka locks every log directory): two brokers on one
    // metadata log would interleave their appends.
    let (metadata_parent, _metadata_dir_lock) = match &config.metadata_log_dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating metadata.log.dir {}", dir.display()))?;
            let absolute = std::fs::canonicalize(dir)
                .with_context(|| format!("resolving metadata.log.dir {}", dir.display()))?;
            // The data directory itself is locked already (a second lock would be refused).
            let lock = (absolute != data_dir)
                .then(|| lock_data_dir(&absolute))
                .transpose()?;
            (absolute, lock)
        }
        None => (data_dir.clone(), None),
    };
    let metadata_dir = metadata::default_dir(&metadata_parent);
    // A node of a multi-node cluster: its controller thread first (the shards start from
    // the image it has replayed, and follow the committed log from then on).
    let cluster = if config.quorum.kraft && !config.quorum.is_single_node(config.node_id) {
        CLUSTER_MODE.store(true, Ordering::SeqCst);
        Some(crate::cluster_node::ClusterNode::start(
            &config,
            metadata_dir.clone(),
        )?)
    } else {
        None
    };
    if let Some(node) = cluster
        .as_ref()
        .filter(|_| !config.quorum.roles.is_controller())
    {
        if !node.wait_first_image(OBSERVER_FIRST_IMAGE_WAIT) {
            tracing::warn!(
                wait_ms = OBSERVER_FIRST_IMAGE_WAIT.as_millis() as u64,
                "no committed metadata from the controllers yet; starting the shards anyway"
            );
        }
    }
    let link = cluster.as_ref().map(|node| node.link.clone());
    if config.listeners.is_empty() && !controller_only {
        return Err(anyhow!("no listener configured"));
    }
    // Held until the stop signal: see `claim_listener`.
    let mut listener_claims = Vec::new();
    for listener in &config.listeners {
        let address = listener.addr();
        if let Some(claim) = claim_listener(&address, &listener_claims)? {
            listener_claims.push(claim);
        }
        ensure_port_free(&address)?;
    }
    // Read the keystore and truststore (and probe kernel TLS) once, before any shard starts:
    // a bad file fails start-up with the key and the file named.
    // The authorizer's settings and the principal mapping rules: a bad value names its key
    // and stops start-up (the shards parse `super.users` again and rely on it being valid).
    api::shard::authorization::authorizer_config(&config)
        .map_err(|error| anyhow!("super.users: {error}"))
        .context("authorizer configuration")?;
    let principal_mapper = acl::PrincipalMapper::parse(&config.ssl_principal_mapping_rules)
        .map_err(|error| anyhow!("ssl.principal.mapping.rules: {error}"))
        .context("authorizer configuration")?;
    api::replication::inter_broker::InterBroker::from_config(&config)
        .context("inter-broker listener configuration")?;
    let tls = if config.listeners.iter().any(|l| l.protocol.is_tls()) {
        Some(Arc::new(
            crate::tls::Acceptor::new(&config.ssl, principal_mapper)
                .context("SSL listener configuration")?,
        ))
    } else {
        None
    };
    let sasl = api::authentication::SaslServer::from_config(&config)
        .context("SASL listener configuration")?;
    let security = crate::accept::Security { tls, sasl };
    crate::startup_log::listeners(&config, security.tls.as_deref());
    let address = config
        .listeners
        .iter()
        .map(|l| format!("{}://{}", l.name, l.addr()))
        .collect::<Vec<_>>()
        .join(",");
    install_signal_handlers();
    let fd_limit = crate::limits::raise_fd_limit();
    let connection_limits = ConnectionLimits::new(&config, fd_limit);
    tracing::info!(
        rlimit_nofile = fd_limit,
        max_connections = connection_limits.max_connections(),
        "file descriptor limit raised to the hard limit"
    );
    crate::startup_log::shard_cores(shard_count, cpus, shard_core);
    crate::startup_log::io_path(&config);
    crate::startup_log::fetch_path(&config, &_data_dir_lock);
    crate::host_checks::log_shortfalls(&data_dir, shard_count, cpus);
    let metrics = crate::metrics::start(config.metrics_listener.as_deref(), shard_count)?;

    let config = Arc::new(config);
    let opened = Arc::new(StartupBarrier::new(shard_count));
    let (ready_sender, ready_receiver) = mpsc::channel::<Result<usize, String>>();
    let (image_sender, image_receiver) = mpsc::channel::<Result<Arc<Image>, String>>();
    let mut image_sender = Some(image_sender);
    // Set once shard 0 has replayed the metadata log; `build` lists shard 0 first.
    let mut image: Option<Arc<Image>> = None;
    let mut executors = Vec::new();
    for endpoint in shard::mesh::build::<ShardMsg, ShardReply>(shard_count) {
        let id = endpoint.id();
        let config = config.clone();
        let metadata = match (&image, image_sender.take()) {
            (Some(image), _) => Metadata::Image(image.clone()),
            (None, Some(opened)) if id == 0 && link.is_some() => Metadata::Cluster { opened },
            (None, Some(opened)) if id == 0 => Metadata::Core {
                dir: metadata_dir.clone(),
                opened,
            },
            _ => {
                return Err(anyhow!(
                    "shard {id} started before the metadata log was opened"
                ))
            }
        };
        let security = security.clone();
        let ready = ready_sender.clone();
        let connection_limits = connection_limits.clone();
        let opened = opened.clone();
        let metrics = metrics.clone();
        let link = link.clone();
        let mut builder = LocalExecutorBuilder::new(Placement::Fixed(shard_core(id, cpus)))
            .name(&format!("shard-{id}"));
        let busy_poll = Duration::from_micros(config.shard_busy_poll_us);
        if let Some(spin) = crate::busy_poll::executor_spin(busy_poll) {
            builder = builder.spin_before_park(spin);
        }
        let executor = builder
            .spawn(move || async move {
                run_shard(
                    id,
                    config,
                    metadata,
                    link,
                    endpoint,
                    security,
                    ready,
                    connection_limits,
                    opened,
                    metrics,
                )
                .await;
            })
            .map_err(|error| anyhow!("starting shard {id}: {error}"))?;
        executors.push(executor);
        if id == 0 {
            // The other shards start from the image shard 0 replayed; a log that cannot be
            // opened stops start-up here, before they exist.
            match image_receiver.recv() {
                Ok(Ok(replayed)) => {
                    tracing::info!(
                        topics = replayed.topics_by_name.len(),
                        shards = shard_count,
                        data_dir = %data_dir.display(),
                        "metadata replayed"
                    );
                    image = Some(replayed);
                }
                Ok(Err(reason)) => {
                    STOP.store(true, Ordering::SeqCst);
                    for executor in executors {
                        let _ = executor.join();
                    }
                    return Err(anyhow!(reason));
                }
                Err(_) => return Err(anyhow!("shard 0 stopped while opening the metadata log")),
            }
        }
    }
    drop(ready_sender);
    for _ in 0..shard_count {
        match ready_receiver.recv() {
            Ok(Ok(_)) => {}
            Ok(Err(reason)) => {
                STOP.store(true, Ordering::SeqCst);
                for executor in executors {
                    let _ = executor.join();
                }
                return Err(anyhow!(reason));
            }
            Err(_) => return Err(anyhow!("a shard stopped during start-up")),
        }
    }
    tracing::info!("listening on {address} with {shard_count} shard(s)");
    // At the stop signal the shards stop listening, while their logs may take seconds more to
    // close: a broker started next on these ports (a restart) must not wait for that, and its
    // port probe covers the moments until the listeners are gone. A thread of its own, so a
    // shard that fails still ends the process through the joins below.
    std::thread::Builder::new()
        .name("listener-claims".into())
        .spawn(move || {
            while !STOP.load(Ordering::SeqCst) {
                std::thread::sleep(STOP_POLL);
            }
            drop(listener_claims);
        })
        .context("starting the listener claims' thread")?;
    if let Some(node) = &cluster {
        // SIGTERM: the controlled shutdown first, then the shards stop.
        while !SIGNALLED.load(Ordering::SeqCst) && !STOP.load(Ordering::SeqCst) {
            std::thread::sleep(STOP_POLL);
        }
        if !STOP.load(Ordering::SeqCst) && !controller_only {
            node.controlled_shutdown();
        }
        STOP.store(true, Ordering::SeqCst);
    }
    for executor in executors {
        executor
            .join()
            .map_err(|error| anyhow!("shard failed: {error:?}"))?;
    }
    if let Some(node) = cluster {
        node.stop();
    }
    tracing::info!("stopped");
    Ok(())
}

/// The core shard `id` is pinned to (what the start-up log prints).
fn shard_core(id: usize, cpus: usize) -> usize {
    id % cpus.max(1)
}

/// Creates `log.dirs` and replaces it by its absolute, canonical path, once, before any shard
/// starts: everything below (glommio's directory handles through io_uring among them) then
/// sees one absolute path, whatever the working directory (a relative `./data` reached
/// io_uring's directory open as an invalid descriptor and took every new partition offline).
fn resolve_data_dir(config: &mut BrokerConfig) -> anyhow::Result<std::path::PathBuf> {
    let configured = config.data_dir().to_path_buf();
    std::fs::create_dir_all(&configured)
        .with_context(|| format!("creating data directory {}", configured.display()))?;
    let absolute = std::fs::canonicalize(&configured)
        .with_context(|| format!("resolving data directory {}", configured.display()))?;
    config.log_dirs[0] = absolute.clone();
    Ok(absolute)
}

/// What a shard starts from.
enum Metadata {
    /// Shard 0, the metadata core: it opens the controller on its own thread (the log's
    /// handles on the storage seam are `Rc`-based, not `Send`, so they cannot be opened on
    /// the main thread and moved there) and sends the replayed image back for the others.
    Core {
        dir: std::path::PathBuf,
        opened: mpsc::Sender<Result<Arc<Image>, String>>,
    },
    /// Shard 0 of a cluster node: its controller stages changes for the quorum, from the
    /// image the controller thread has committed so far.
    Cluster {
        opened: mpsc::Sender<Result<Arc<Image>, String>>,
    },
    /// Every other shard: the image shard 0 replayed.
    Image(Arc<Image>),
}

#[allow(clippy::too_many_arguments)] // one shard's whole start-up context, passed once
async fn run_shard(
    id: usize,
    config: Arc<BrokerConfig>,
    metadata: Metadata,
    link: Option<Arc<crate::metadata::cluster::ClusterLink>>,
    endpoint: shard::mesh::MeshEndpoint<ShardMsg, ShardReply>,
    security: crate::accept::Security,
    ready: mpsc::Sender<Result<usize, String>>,
    connection_limits: Arc<ConnectionLimits>,
    opened: Arc<StartupBarrier>,
    metrics: Option<Arc<crate::metrics::Board>>,
) {
    let (image, controller) = match metadata {
        Metadata::Image(image) => (image, None),
        Metadata::Cluster { opened } => {
            let image = link
                .as_ref()
                .map(|link| link.committed().0)
                .unwrap_or_default();
            let _ = opened.send(Ok(image.clone()));
            let controller = Controller::staged((*config).clone(), image.clone());
            (image, Some(controller))
        }
        Metadata::Core { dir, opened } => {
            match Controller::open(&shard::storage::Disk::Real, &dir, (*config).clone()) {
                Ok(controller) => {
                    let image = controller.image();
                    let _ = opened.send(Ok(image.clone()));
                    (image, Some(controller))
                }
                Err(error) => {
                    let _ = opened.send(Err(format!(
                        "opening the metadata log in {}: {error}",
                        dir.display()
                    )));
                    return;
                }
            }
        }
    };
    let shard = Shard::new(id, config, Arc::new(Image::default()), controller, link);
    shard.group_commit.spawn();
    let mesh = endpoint
        .connect(Rc::new(crate::shard::Inbox(shard.clone())))
        .await;
    shard.set_mesh(mesh);
    // This shard's share of `log.fd.cache.size`, set before any log opens.
    shard::log::fd_cache::set_shard_capacity(shard::log::fd_cache::per_shard_capacity(
        shard.config.log_fd_cache_size as usize,
        shard.shard_count(),
    ));
    shard.apply_image(image).await;
    // A shard listening before the others opened their partitions would answer Metadata for
    // partitions whose owner cannot serve them yet (NOT_LEADER_OR_FOLLOWER after a restart).
    opened.arrive_and_wait(id, shard.partition_count()).await;
    // Every listener on every shard (SO_REUSEPORT: the kernel spreads each port's
    // connections over the shards).
    let mut sockets = Vec::new();
    for listener in &shard.config.listeners {
        match TcpListener::bind(listener.addr().as_str()) {
            Ok(socket) => sockets.push((socket, listener.clone())),
            Err(error) => {
                let _ = ready.send(Err(format!(
                    "shard {id} cannot listen on {} ({}): {error}",
                    listener.addr(),
                    listener.name
                )));
                return;
            }
        }
    }
    let _ = ready.send(Ok(id));
    if id == 0 && shard.cluster.is_some() {
        glommio::spawn_local(crate::handlers::forwarded::serve(shard.clone())).detach();
        glommio::spawn_local(crate::handlers::forwarded::follow_committed(shard.clone())).detach();
    }
    glommio::spawn_local(crate::busy_poll::run(Duration::from_micros(
        shard.config.shard_busy_poll_us,
    )))
    .detach();
    if let Some(board) = metrics {
        glommio::spawn_local(crate::metrics::snapshot::publish(
            Rc::downgrade(&shard),
            board,
        ))
        .detach();
    }
    let budget = shard.handoff.budget(&shard.config);
    let refusals = Rc::new(RefusalLog::default());
    glommio::spawn_local(crate::group::Coordinator::run_timer(Rc::downgrade(&shard))).detach();
    glommio::spawn_local(api::txn::run_timer(Rc::downgrade(&shard))).detach();
    let retained = Rc::downgrade(&shard);
    let retention_check = Duration::from_millis(shard.config.log_retention_check_interval_ms);
    glommio::spawn_local(async move {
        loop {
            glommio::timer::sleep(retention_check).await;
            let Some(shard) = retained.upgrade() else {
                return;
            };
            shard.apply_retention();
        }
    })
    .detach();
    // The log cleaner: its own low-priority task queue, so a pass never delays produce or
    // fetch work (it also yields between batches).
    let cleaner_queue = glommio::executor().create_task_queue(
        glommio::Shares::Static(CLEANER_SHARES),
        glommio::Latency::NotImportant,
        "log-cleaner",
    );
    let cleaned = Rc::downgrade(&shard);
    let backoff = Duration::from_millis(shard.config.log_cleaner_backoff_ms);
    let map_bytes = (shard.config.log_cleaner_dedupe_buffer_size as usize / shard.shard_count())
        .max(CLEANER_MIN_MAP_BYTES);
    let cleaner_task = glommio::spawn_local_into(
        async move {
            let mut cleaner = shard::log::cleaner::Cleaner::new(map_bytes);
            loop {
                let Some(shard) = cleaned.upgrade() else {
                    return;
                };
                let busy = shard.clean_filthiest_log(&mut cleaner).await;
                drop(shard);
                if !busy {
                    glommio::timer::sleep(backoff).await;
                }
            }
        },
        cleaner_queue,
    );
    match cleaner_task {
        Ok(task) => {
            task.detach();
        }
        Err(error) => tracing::error!(shard = id, %error, "log cleaner not started"),
    }
    let accepting: Vec<_> = sockets
        .into_iter()
        .map(|(socket, listener)| {
            glommio::spawn_local(crate::accept::accept_loop(
                shard.clone(),
                socket,
                listener,
                security.clone(),
                budget.clone(),
                connection_limits.clone(),
                refusals.clone(),
            ))
        })
        .collect();
    if accepting.is_empty() {
        // A controller-only node's metadata core: no listener; it serves until the stop.
        while !STOP.load(Ordering::SeqCst) {
            glommio::timer::sleep(STOP_POLL).await;
        }
    }
    for task in accepting {
        task.await;
    }
    let partitions = shard.partition_count();
    let closing = Instant::now();
    shard.close().await;
    tracing::info!(
        shard = id,
        partitions,
        elapsed_ms = closing.elapsed().as_millis() as u64,
        "partition logs closed"
    );
    let stats = &shard.stats;
    let (busy_polls, busy_poll_ms) = crate::busy_poll::stats();
    tracing::info!(
        "shard {id} stats: requests={} produce_batches={} fetches={} forwarded_in={} forwarded_out={} partitions={} cancelled_waits={} busy_polls={busy_polls} busy_poll_ms={busy_poll_ms} response_writes={} responses_written={} handoffs_out={} handoffs_in={}",
        stats.requests.get(),
        stats.produce_batches.get(),
        stats.fetches.get(),
        stats.forwarded_in.get(),
        stats.forwarded_out.get(),
        partitions,
        stats.cancelled_waits.get(),
        stats.response_writes.get(),
        stats.responses_written.get(),
        stats.handoffs_out.get(),
        stats.handoffs_in.get(),
    );
    let send = &stats.send;
    tracing::info!(
        "shard {id} fetch path: hot_ranges={} cold_ranges={} cold_bytes={} sendfile_bytes={} copied_bytes={} remote_range_bytes={}",
        send.hot_ranges.get(),
        send.cold_ranges.get(),
        send.cold_bytes.get(),
        send.sendfile_bytes.get(),
        send.copied_bytes.get(),
        stats.remote_range_bytes.get(),
    );
    tracing::info!(
        "shard {id} group commit: {}",
        shard.group_commit.stats().summary()
    );
}

/// Holds every shard's listener back until all shards have opened the partitions of the
/// replayed image, as Kafka's `LogManager.startup` completes before its socket server starts
/// processing requests.
struct StartupBarrier {
    shards: usize,
    arrived: AtomicUsize,
    started: Instant,
}

/// How often a shard that opened its partitions looks whether the others have too (a shard
/// must keep its executor running meanwhile: mesh traffic, group-offset loading).
const STARTUP_BARRIER_POLL: Duration = Duration::from_millis(1);

impl StartupBarrier {
    fn new(shards: usize) -> StartupBarrier {
        StartupBarrier {
            shards,
            arrived: AtomicUsize::new(0),
            started: Instant::now(),
        }
    }

    /// Records that shard `id` opened its `partitions`, then waits for the other shards (or a
    /// stop signal, which ends start-up anyway).
    async fn arrive_and_wait(&self, id: usize, partitions: usize) {
        let elapsed_ms = self.started.elapsed().as_millis();
        tracing::info!(shard = id, partitions, elapsed_ms, "partition logs opened");
        if self.arrived.fetch_add(1, Ordering::SeqCst) + 1 == self.shards {
            tracing::info!(
                shards = self.shards,
                elapsed_ms,
                "every shard opened its partition logs; accepting connections"
            );
        }
        while self.arrived.load(Ordering::SeqCst) < self.shards && !STOP.load(Ordering::SeqCst) {
            glommio::timer::sleep(STARTUP_BARRIER_POLL).await;
        }
    }
}

/// Takes Kafka's `.lock` file of the data directory (an exclusive `flock`, released by the
/// kernel when the process ends, however it ends).
fn lock_data_dir(data_dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    let path = data_dir.join(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(anyhow!(
            "data directory {} is in use by another broker ({}: {})",
            data_dir.display(),
            path.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(file)
}

/// A claim on a listener address among the brokers of this host (of this network namespace):
/// an abstract Unix socket named after the address, bound from start-up to the stop signal.
/// Two brokers started at the same moment on one port both find it free (`ensure_port_free`
/// probes before either listens) and would then share it through SO_REUSEPORT, each taking
/// part of the other's connections; the claim is atomic, so the second one fails instead.
/// The kernel releases it when the process exits, however it exits (also after kill -9); a
/// claim held by a broker that is stopping is waited for, as the port probe waits.
/// None when this process already holds the claim (the same address listed twice).
fn claim_listener(
    address: &str,
    held: &[(String, std::os::unix::net::UnixListener)],
) -> anyhow::Result<Option<(String, std::os::unix::net::UnixListener)>> {
    use std::os::linux::net::SocketAddrExt;
    if held.iter().any(|(claimed, _)| claimed == address) {
        return Ok(None);
    }
    let name = format!("kafka-protocol-broker listener {address}");
    retry_while_busy(address, || {
        let claim = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())
            .and_then(|name| std::os::unix::net::UnixListener::bind_addr(&name));
        match claim {
            Ok(claim) => Ok(Attempt::Done(Some((address.to_string(), claim)))),
            Err(error) if error.kind() == std::io::ErrorKind::AddrInUse => Ok(Attempt::Busy(
                format!("another broker on this host holds its claim \"{name}\""),
            )),
            Err(error) => {
                // A protection, not a requirement: without it the port probe still runs.
                tracing::warn!(%address, %error, "could not claim the listener address among this host's brokers");
                Ok(Attempt::Done(None))
            }
        }
    })
}

/// Shards listen with SO_REUSEPORT, which would also let a second broker share the port and
/// take part of its connections. So a listener that keeps accepting connections on the port
/// before we bind means the port is taken: fail, as Kafka does ("address in use").
///
/// Why not a plain bind without SO_REUSEPORT, and why probe for a while: right after a
/// kill -9 the dead broker's sockets outlive it until the kernel tears down its io_uring
/// (asynchronously); its listener even completes handshakes meanwhile. A bind fails then and a
/// single connect succeeds, although nobody will ever serve the port again.
fn ensure_port_free(address: &str) -> anyhow::Result<()> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};
    let targets: Vec<SocketAddr> = address
        .to_socket_addrs()
        .with_context(|| format!("resolving listener {address}"))?
        .map(|addr| {
            if !addr.ip().is_unspecified() {
                return addr;
            }
            let loopback = match addr.ip() {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
            };
            SocketAddr::new(loopback, addr.port())
        })
        .collect();
    retry_while_busy(address, || {
        let busy = targets
            .iter()
            .find(|addr| std::net::TcpStream::connect_timeout(addr, PORT_PROBE_TIMEOUT).is_ok());
        Ok(match busy {
            None => Attempt::Done(()),
            Some(busy) => Attempt::Busy(format!("another process accepts connections on {busy}")),
        })
    })
}

/// One try at something another broker (or a dying one's sockets) may hold for a while.
enum Attempt<T> {
    Done(T),
    /// Held; says by whom.
    Busy(String),
}

/// Tries `attempt` every PORT_RETRY_INTERVAL until it is done, failing with "address in use"
/// once it has been busy for PORT_BUSY_PATIENCE; says once that it is waiting.
fn retry_while_busy<T>(
    address: &str,
    mut attempt: impl FnMut() -> anyhow::Result<Attempt<T>>,
) -> anyhow::Result<T> {
    let started = Instant::now();
    let mut said = false;
    loop {
        let holder = match attempt()? {
            Attempt::Done(done) => return Ok(done),
            Attempt::Busy(holder) => holder,
        };
        let waited = started.elapsed();
        if waited >= PORT_BUSY_PATIENCE {
            return Err(anyhow!(
                "listener {address} is not available: address in use ({holder}, for {} ms)",
                waited.as_millis()
            ));
        }
        if !said {
            tracing::info!(%address, %holder, "listener address is busy; waiting for it to be released");
            said = true;
        }
        std::thread::sleep(PORT_RETRY_INTERVAL);
    }
}

/// How long a port may keep accepting connections at start-up before we call it taken (a
/// killed broker's listener lingers until the kernel has torn down its io_uring).
const PORT_BUSY_PATIENCE: Duration = Duration::from_secs(5);

/// How often a busy listener address is tried again at start-up.
const PORT_RETRY_INTERVAL: Duration = Duration::from_millis(100);

/// How long the start-up probe of the listener port waits for a connection.
const PORT_PROBE_TIMEOUT: Duration = Duration::from_millis(500);

//! A node of a multi-node cluster: its controller thread runs on a glommio executor of its own
//! and talks to the shards through a `metadata::cluster::ClusterLink`. What it runs follows
//! `process.roles`: a controller (`controller`, `broker,controller`) runs the quorum voter and
//! its CONTROLLER listener; a broker (`broker`, `broker,controller`) runs its registration and
//! heartbeats (`controller::agent`); a broker-only node runs no voter but the quorum observer
//! (`controller::observer`), which follows the committed image through a voter. On SIGTERM the broker first asks the active
//! controller for a controlled shutdown (its leaderships move away), for at most
//! `CONTROLLED_SHUTDOWN_WAIT`, then stops its shards, then its controller.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use controller::agent::{AgentConfig, Shutdown};
use controller::{ClusterRole, ElectionConfig, RuntimeConfig, Voter};
use glommio::{LocalExecutorBuilder, Placement};

use crate::config::BrokerConfig;
use crate::metadata::cluster::ClusterLink;
use crate::metadata::records::BrokerEndpoint;

/// One tick of the quorum's clock; `controller.quorum.election.timeout.ms` is counted in them.
const TICK: Duration = Duration::from_millis(100);
/// How long SIGTERM waits for the controller to move this broker's leaderships away.
pub const CONTROLLED_SHUTDOWN_WAIT: Duration = Duration::from_secs(10);
/// How often the controller thread looks at its stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

/// The running controller thread of this node.
pub struct ClusterNode {
    pub link: Arc<ClusterLink>,
    shutdown: Arc<Shutdown>,
    stop: Arc<AtomicBool>,
    thread: Option<glommio::ExecutorJoinHandle<()>>,
}

fn resolve(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .with_context(|| format!("resolving {host}:{port}"))?
        .next()
        .ok_or_else(|| anyhow!("{host}:{port} resolves to no address"))
}

impl ClusterNode {
    /// Starts the controller thread: its log in `dir`, listening on the CONTROLLER listener.
    pub fn start(config: &BrokerConfig, dir: PathBuf) -> anyhow::Result<ClusterNode> {
        let quorum = &config.quorum;
        let (is_broker, is_controller) = (quorum.roles.is_broker(), quorum.roles.is_controller());
        let listener = match is_controller {
            true => Some(
                quorum
                    .controller_listener
                    .as_ref()
                    .and_then(|c| c.listener.clone())
                    .ok_or_else(|| {
                        anyhow!("a controller needs a CONTROLLER listener in `listeners`")
                    })?,
            ),
            false => None,
        };
        if quorum.voters.is_empty() {
            return Err(anyhow!(
                "controller.quorum.voters is empty: a node of a cluster finds its voters there \
                 (controller.quorum.bootstrap.servers alone is not supported yet)"
            ));
        }
        let mut voters = Vec::new();
        let mut addresses = BTreeMap::new();
        for voter in &quorum.voters {
            let addr = resolve(&voter.host, voter.port)?;
            addresses.insert(voter.id, addr);
            voters.push(Voter {
                id: u64::try_from(voter.id).context("voter ids are not negative")?,
                addr,
            });
        }
        let bind = listener
            .map(|listener| resolve(&listener.host, listener.port))
            .transpose()?;
        let (link, proposals) = ClusterLink::new(config.node_id, addresses);
        let cluster_id = config
            .cluster_id
            .clone()
            .unwrap_or_else(|| crate::metadata::cluster::DEFAULT_CLUSTER_ID.to_string());
        let endpoints = config
            .advertised_listeners
            .iter()
            .map(|l| BrokerEndpoint {
                name: l.name.clone(),
                host: l.host.clone(),
                port: l.port,
                security_protocol: l.protocol.id(),
            })
            .collect();
        let agent = AgentConfig {
            broker_id: config.node_id,
            cluster_id: cluster_id.clone(),
            endpoints,
            rack: None,
            heartbeat_interval: Duration::from_millis(
                u64::try_from(quorum.broker_heartbeat_interval_ms).unwrap_or(2000),
            ),
            request_timeout: Duration::from_millis(
                u64::try_from(quorum.request_timeout_ms).unwrap_or(2000),
            ),
        };
        let runtime = RuntimeConfig {
            id: u64::try_from(config.node_id).context("node.id is not negative")?,
            voters,
            dir,
            tick: TICK,
            election_ticks: (u128::from(u32::try_from(quorum.election_timeout_ms).unwrap_or(1000))
                / TICK.as_millis())
            .max(2) as usize,
        };
        let role_link = link.clone();
        let session_timeout_ms = i64::from(quorum.broker_session_timeout_ms);
        let elections = ElectionConfig {
            auto_rebalance: config.replication.auto_leader_rebalance,
            rebalance_interval: Duration::from_millis(
                config.replication.leader_imbalance_check_interval_ms,
            ),
            unclean_default: config.replication.unclean_leader_election,
        };
        let shutdown = Arc::new(Shutdown::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_shutdown, thread_stop) = (shutdown.clone(), stop.clone());
        let (started_tx, started_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let thread = LocalExecutorBuilder::new(Placement::Unbound)
            .name("controller")
            .spawn(move || async move {
                let listener = match bind.map(|bind| (bind, glommio::net::TcpListener::bind(bind)))
                {
                    None => None,
                    Some((_, Ok(listener))) => Some(listener),
                    Some((bind, Err(error))) => {
                        let _ =
                            started_tx.send(Err(format!("controller listener {bind}: {error}")));
                        return;
                    }
                };
                let _ = started_tx.send(Ok(()));
                let local_stop = Rc::new(Cell::new(false));
                let watcher_stop = local_stop.clone();
                glommio::spawn_local(async move {
                    while !thread_stop.load(Ordering::Acquire) {
                        glommio::timer::sleep(STOP_POLL).await;
                    }
                    watcher_stop.set(true);
                })
                .detach();
                if is_broker {
                    glommio::spawn_local(controller::agent::run(
                        agent,
                        role_link.clone(),
                        thread_shutdown,
                        local_stop.clone(),
                    ))
                    .detach();
                }
                let Some(listener) = listener else {
                    // A broker-only node: a quorum observer, no voter.
                    controller::observer::run(role_link, local_stop).await;
                    return;
                };
                // Commands are for tests and tools; this node proposes through the link.
                let (_commands, receiver) = glommio::channels::local_channel::new_bounded(1);
                let role = ClusterRole {
                    link: role_link,
                    proposals,
                    cluster_id,
                    session_timeout_ms,
                    elections,
                };
                if let Err(error) = controller::run(
                    runtime,
                    storage::Disk::Real,
                    listener,
                    receiver,
                    Some(role),
                    local_stop,
                )
                .await
                {
                    tracing::error!(%error, "the controller stopped");
                }
            })
            .map_err(|error| anyhow!("starting the controller thread: {error}"))?;
        match started_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => return Err(anyhow!(reason)),
            Err(_) => return Err(anyhow!("the controller thread stopped while starting")),
        }
        tracing::info!(
            node = config.node_id,
            voters = quorum.voters.len(),
            listener = ?bind,
            broker = is_broker,
            controller = is_controller,
            "controller thread started"
        );
        Ok(ClusterNode {
            link,
            shutdown,
            stop,
            thread: Some(thread),
        })
    }

    /// A broker-only node: waits until the observer has published a first committed image,
    /// at most `wait` (the shards then start from it; later ones follow).
    pub fn wait_first_image(&self, wait: Duration) -> bool {
        let started = Instant::now();
        while self.link.applied() == 0 && started.elapsed() < wait {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.link.applied() > 0
    }

    /// Asks the active controller for a controlled shutdown and waits until it says this
    /// broker leads nothing, or `CONTROLLED_SHUTDOWN_WAIT`.
    pub fn controlled_shutdown(&self) {
        self.shutdown.requested.store(true, Ordering::Release);
        let started = Instant::now();
        while !self.shutdown.done.load(Ordering::Acquire)
            && started.elapsed() < CONTROLLED_SHUTDOWN_WAIT
        {
            std::thread::sleep(Duration::from_millis(50));
        }
        tracing::info!(
            done = self.shutdown.done.load(Ordering::Acquire),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "controlled shutdown"
        );
    }

    /// Stops the controller thread and waits for it.
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

//! A listener's accept loop on one shard, and what a new connection goes through before its
//! requests are served: the TLS handshake (SSL, SASL_SSL), then SASL authentication
//! (SASL_PLAINTEXT, SASL_SSL). Each accepted connection runs in its own task, holding its
//! place under `max.connections` from the accept on.

use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use glommio::net::{TcpListener, TcpStream};

use crate::config::Listener;
use crate::limits::{ConnectionLimits, ConnectionSlot, RefusalLog, ShardBudget};
use crate::server::{STOP, STOP_POLL};
use crate::shard::Shard;
use crate::transport::Transport;

/// What the listeners need to secure connections, built once before the shards start.
#[derive(Clone, Default)]
pub struct Security {
    /// SSL and SASL_SSL listeners' TLS (keystore, truststore, kernel TLS probe).
    pub tls: Option<Arc<crate::tls::Acceptor>>,
    /// SASL_PLAINTEXT and SASL_SSL listeners' mechanisms and users.
    pub sasl: Option<Arc<api::authentication::SaslServer>>,
}

/// Accepts one listener's connections on this shard until the stop signal.
pub async fn accept_loop(
    shard: Rc<Shard>,
    socket: TcpListener,
    listener: Listener,
    security: Security,
    budget: Rc<ShardBudget>,
    connection_limits: Arc<ConnectionLimits>,
    refusals: Rc<RefusalLog>,
) {
    let id = shard.id;
    let listener = Rc::new(listener);
    loop {
        let accept = socket.accept();
        let stop = async {
            while !STOP.load(Ordering::SeqCst) {
                glommio::timer::sleep(STOP_POLL).await;
            }
        };
        futures::pin_mut!(accept, stop);
        match futures::future::select(accept, stop).await {
            futures::future::Either::Left((Ok(stream), _)) => {
                let peer = stream.peer_addr().ok();
                let slot = match connection_limits.admit(peer.map(|addr| addr.ip())) {
                    Ok(slot) => slot,
                    // As Kafka does: accepted, then closed at once (dropping the stream).
                    Err(refusal) => {
                        shard.metrics.connection_refused();
                        let peer =
                            peer.map_or_else(|| "unknown".to_string(), |addr| addr.to_string());
                        refusals.refused(id, &peer, &refusal);
                        continue;
                    }
                };
                // KIP-612: over its address's connection_creation_rate, the connection is
                // held for the throttle time, then closed (as Kafka: the client's next
                // attempt comes after it). Its slot is held meanwhile: at most
                // max.connections wait.
                let throttle = peer.and_then(|addr| {
                    let now = std::time::Instant::now();
                    shard.with_image(|image| {
                        api::quota::admit_connection(&image.quotas, addr.ip(), now)
                    })
                });
                if let (Some(wait), Some(addr)) = (throttle, peer) {
                    shard.metrics.connection_refused();
                    tracing::debug!(shard = id, peer = %addr, wait_ms = wait.as_millis() as u64, "connection_creation_rate exceeded: closing after the throttle");
                    glommio::spawn_local(async move {
                        glommio::timer::sleep(wait).await;
                        drop(stream);
                        drop(slot);
                    })
                    .detach();
                    continue;
                }
                shard.metrics.connection_accepted();
                let peer = peer.map_or_else(|| "unknown".to_string(), |addr| addr.to_string());
                let accepted = Accepted {
                    shard: shard.clone(),
                    listener: listener.clone(),
                    security: security.clone(),
                    budget: budget.clone(),
                    slot,
                    peer,
                };
                glommio::spawn_local(accepted.serve(stream)).detach();
            }
            futures::future::Either::Left((Err(error), _)) => {
                tracing::warn!(shard = id, listener = %listener.name, %error, "accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            futures::future::Either::Right(_) => break,
        }
    }
}

/// A connection just accepted, and what serving it needs.
struct Accepted {
    shard: Rc<Shard>,
    listener: Rc<Listener>,
    security: Security,
    budget: Rc<ShardBudget>,
    slot: ConnectionSlot,
    peer: String,
}

impl Accepted {
    async fn serve(self, stream: TcpStream) {
        let Accepted {
            shard,
            listener,
            security,
            budget,
            slot,
            peer,
        } = self;
        let name = listener.name.as_str();
        let protocol = listener.protocol;
        let mut transport = match (&security.tls, protocol.is_tls()) {
            (Some(acceptor), true) => match handshake(acceptor, stream, &peer, name).await {
                Some(transport) => transport,
                None => {
                    shard.metrics.connection_closed_unserved();
                    return;
                }
            },
            _ => {
                tracing::debug!(target: "broker::server", peer = %peer, listener = %name, shard = shard.id, "connection accepted");
                Transport::plain(stream).on_listener(name)
            }
        };
        let mut unread = BytesMut::new();
        let mut session = None;
        if let (Some(server), true) = (&security.sasl, protocol.is_sasl()) {
            match api::authentication::authenticate(&shard, &mut transport, server).await {
                Ok(authenticated) => {
                    tracing::debug!(
                        peer = %peer,
                        listener = %name,
                        principal = %authenticated.principal,
                        "SASL authentication succeeded"
                    );
                    transport.principal = Rc::from(authenticated.principal);
                    unread = authenticated.unread;
                    session = Some(authenticated.session);
                }
                Err(reason) => {
                    tracing::info!(peer = %peer, listener = %name, %reason, "SASL authentication failed; connection closed");
                    shard.metrics.connection_closed_unserved();
                    transport.writer.close().await;
                    return;
                }
            }
        }
        crate::connection::serve(shard, transport, budget, slot, unread, session).await;
    }
}

/// The TLS handshake of a connection, bounded by `tls::HANDSHAKE_TIMEOUT`; `None` when it
/// failed (logged, one line).
async fn handshake(
    acceptor: &crate::tls::Acceptor,
    stream: TcpStream,
    peer: &str,
    name: &str,
) -> Option<Transport> {
    let _ = stream.set_nodelay(true);
    let handshake = acceptor.accept(stream);
    let timeout = glommio::timer::sleep(crate::tls::HANDSHAKE_TIMEOUT);
    futures::pin_mut!(handshake, timeout);
    let accepted = match futures::future::select(handshake, timeout).await {
        futures::future::Either::Left((Ok(accepted), _)) => accepted,
        futures::future::Either::Left((Err(error), _)) => {
            tracing::info!(peer = %peer, listener = %name, %error, "TLS handshake failed; connection closed");
            return None;
        }
        futures::future::Either::Right(_) => {
            tracing::info!(peer = %peer, listener = %name, "TLS handshake timed out; connection closed");
            return None;
        }
    };
    let transport = Transport::tls(accepted, peer.to_string()).on_listener(name);
    tracing::debug!(
        peer = %transport.peer,
        listener = %name,
        principal = %transport.principal,
        "TLS connection accepted"
    );
    Some(transport)
}

//! DescribeCluster (API 60, KIP-700): the cluster id, the controller and the brokers, as
//! Metadata reports them but without topics, answered by a broker as Kafka's brokers answer it
//! (endpoint type 1; a request for controllers (2) is told MISMATCHED_ENDPOINT_TYPE, an
//! unknown type UNSUPPORTED_ENDPOINT_TYPE, both INVALID_REQUEST at v0).

use std::rc::Rc;

use wire::generated::describe_cluster_response::DescribeClusterBroker;
use wire::generated::{DescribeClusterRequest, DescribeClusterResponse};
use wire::ErrorCode;

use super::{encode_response, RequestContext, Response};
use crate::shard::Shard;

/// KIP-919's endpoint types.
const ENDPOINT_BROKERS: i8 = 1;
const ENDPOINT_CONTROLLERS: i8 = 2;

pub async fn handle(
    shard: Rc<Shard>,
    request: DescribeClusterRequest,
    ctx: RequestContext,
) -> Response {
    let version = ctx.api_version;
    let refused = |code: ErrorCode, message: String| DescribeClusterResponse {
        // v0 has neither code, so Kafka answers INVALID_REQUEST there.
        error_code: if version == 0 {
            ErrorCode::InvalidRequest.code()
        } else {
            code.code()
        },
        error_message: Some(message),
        endpoint_type: request.endpoint_type,
        ..Default::default()
    };
    let response = match request.endpoint_type {
        ENDPOINT_BROKERS => {
            let config = &shard.config;
            DescribeClusterResponse {
                error_code: 0,
                error_message: None,
                endpoint_type: ENDPOINT_BROKERS,
                cluster_id: super::metadata::cluster_id(config),
                controller_id: super::cluster_view::controller_id(&shard),
                // The endpoints of the listener the request came through, as Metadata.
                brokers: super::cluster_view::brokers(&shard, &ctx.listener)
                    .into_iter()
                    .map(|b| DescribeClusterBroker {
                        broker_id: b.node_id,
                        host: b.host,
                        port: b.port,
                        rack: b.rack,
                        ..Default::default()
                    })
                    .collect(),
                // Kafka: the bit set needs DESCRIBE on the cluster (0 without it).
                cluster_authorized_operations: if !request.include_cluster_authorized_operations {
                    i32::MIN
                } else if shard.authorize_cluster(&ctx, acl::AclOperation::Describe) {
                    shard.authorized_operations(&ctx, acl::ResourceType::Cluster, acl::CLUSTER_NAME)
                } else {
                    0
                },
                ..Default::default()
            }
        }
        ENDPOINT_CONTROLLERS => refused(
            ErrorCode::MismatchedEndpointType,
            "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of \
             type CONTROLLER"
                .to_owned(),
        ),
        other => refused(
            ErrorCode::UnsupportedEndpointType,
            format!("Unsupported endpoint type {other}"),
        ),
    };
    encode_response(&ctx, version, &response)
}

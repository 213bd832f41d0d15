//! `supports_op` questions: one node, or several in one round trip, about
//! the device itself or about a node reading its weights from one of the
//! device's extra buffer types.

use backplane_abi::TensorDesc;

use super::{Client, RemoteError};
use crate::codec::encode_graph;
use crate::pb;

impl Client {
    /// The server device's verdict on `graph[node]`; with a nonempty
    /// `buffer_type` (one of the device's extra buffer types), whether the
    /// node runs with its weight operand (`src[0]`) in a buffer of that type.
    pub fn supports_op(
        &self,
        device: u32,
        buffer_type: &str,
        graph: &[TensorDesc],
        node: usize,
    ) -> Result<Result<(), String>, RemoteError> {
        let packed = encode_graph(graph);
        self.with(
            &format!(
                "supports_op of node {node} on device {device}{}",
                in_type(buffer_type)
            ),
            async |c| {
                let v = c
                    .grpc
                    .supports_op(pb::SupportsOpRequest {
                        device,
                        graph: packed,
                        node: node as u32,
                        buffer_type: buffer_type.to_string(),
                    })
                    .await?
                    .into_inner();
                Ok(if v.supported { Ok(()) } else { Err(v.reason) })
            },
        )
    }

    /// The server device's verdicts on several nodes of `graph` in one
    /// round trip, in the order of `nodes` (`buffer_type` as in
    /// [`Client::supports_op`]). A server without the call answers
    /// `UNIMPLEMENTED` ([`RemoteError::is_unimplemented`]).
    pub fn supports_ops(
        &self,
        device: u32,
        buffer_type: &str,
        graph: &[TensorDesc],
        nodes: &[u32],
    ) -> Result<Vec<Result<(), String>>, RemoteError> {
        let packed = encode_graph(graph);
        self.with(
            &format!(
                "supports_op of {} nodes on device {device}{}",
                nodes.len(),
                in_type(buffer_type)
            ),
            async |c| {
                let r = c
                    .grpc
                    .supports_ops(pb::SupportsOpsRequest {
                        device,
                        graph: packed,
                        nodes: nodes.to_vec(),
                        buffer_type: buffer_type.to_string(),
                    })
                    .await?
                    .into_inner();
                if r.verdicts.len() != nodes.len() {
                    return Err(tonic::Status::data_loss(format!(
                        "{} verdicts for {} nodes",
                        r.verdicts.len(),
                        nodes.len()
                    )));
                }
                Ok(r.verdicts
                    .into_iter()
                    .map(|v| if v.supported { Ok(()) } else { Err(v.reason) })
                    .collect())
            },
        )
    }
}

/// " with weights in NAME" for an extra buffer type, "" for the device.
fn in_type(buffer_type: &str) -> String {
    if buffer_type.is_empty() {
        String::new()
    } else {
        format!(" with weights in {buffer_type}")
    }
}

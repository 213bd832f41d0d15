//! Tensor bytes and buffer contents: uploads (queued when small, filled
//! from the server's model store when it holds them, else streamed in
//! chunks), downloads, memsets and clears.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use backplane_abi::TensorDesc;

use super::{Client, RemoteBuffer, RemoteError};
use crate::codec::encode_desc;
use crate::pb;
use crate::pb::buffer_op::Op;
use crate::queue::{self, QUEUE_UPLOAD_MAX};
use crate::store::{MIN_STORED_BYTES, content_hash};

impl Client {
    /// Writes `data` at `offset` within `tensor` (whose `buffer` is `b.handle`).
    pub fn upload(
        &self,
        b: &RemoteBuffer,
        tensor: &TensorDesc,
        offset: u64,
        data: &[u8],
    ) -> Result<(), RemoteError> {
        let what = format!("upload of {} bytes", data.len());
        let packed = encode_desc(tensor);
        self.with(&what, async |c| {
            self.check_session(c, b)?;
            queue::check_range("upload", tensor, b.size, offset, data.len() as u64)
                .map_err(tonic::Status::invalid_argument)?;
            let place = (b.handle, tensor.offset);
            let ask_store = c.hello.stored_tensors > 0
                && data.len() as u64 >= MIN_STORED_BYTES
                && !c.store_misses.contains(&place);
            let queueable = QUEUE_UPLOAD_MAX.min(c.hello.max_chunk_bytes as usize);
            if !ask_store && data.len() <= queueable {
                c.room_for(data.len()).await?;
                let part = pb::UploadChunk {
                    handle: b.handle,
                    tensor: packed,
                    offset,
                    data: data.to_vec(),
                };
                c.pending.push(Op::Upload(part), data.len());
                self.sent_bytes
                    .fetch_add(data.len() as u64, Ordering::Relaxed);
                return Ok(());
            }
            if ask_store {
                // Ask the server to fill it from its own files first.
                let before = c.pending.take();
                let r = c
                    .grpc
                    .upload_stored(pb::UploadStoredRequest {
                        handle: b.handle,
                        tensor: packed.clone(),
                        offset,
                        size: data.len() as u64,
                        hash: content_hash(data).to_vec(),
                        before,
                    })
                    .await?
                    .into_inner();
                if r.found {
                    self.stored_bytes
                        .fetch_add(data.len() as u64, Ordering::Relaxed);
                    return Ok(());
                }
                if c.store_misses.len() >= 65536 {
                    c.store_misses.clear();
                }
                c.store_misses.insert(place);
            }
            c.flush().await?;
            self.sent_bytes
                .fetch_add(data.len() as u64, Ordering::Relaxed);
            let data: Arc<[u8]> = Arc::from(data);
            let chunk = (c.hello.max_chunk_bytes.max(1) as usize).min(4 << 20);
            let n = data.len().div_ceil(chunk).max(1);
            let (h, packed, data) = (b.handle, packed.clone(), data.clone());
            let parts = (0..n).map(move |i| {
                let lo = i * chunk;
                let hi = (lo + chunk).min(data.len());
                pb::UploadChunk {
                    handle: h,
                    tensor: if i == 0 { packed.clone() } else { Vec::new() },
                    offset: offset + lo as u64,
                    data: data[lo..hi].to_vec(),
                }
            });
            c.grpc.upload(tokio_stream::iter(parts)).await?;
            Ok(())
        })
    }

    /// Reads `out.len()` bytes at `offset` within `tensor`.
    pub fn download(
        &self,
        b: &RemoteBuffer,
        tensor: &TensorDesc,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), RemoteError> {
        let packed = encode_desc(tensor);
        self.with(&format!("download of {} bytes", out.len()), async |c| {
            self.check_session(c, b)?;
            let before = c.pending.take();
            let mut s = c
                .grpc
                .download(pb::DownloadRequest {
                    handle: b.handle,
                    tensor: packed,
                    offset,
                    size: out.len() as u64,
                    before,
                })
                .await?
                .into_inner();
            let mut at = 0usize;
            while let Some(chunk) = s.message().await? {
                let end = at + chunk.data.len();
                if end > out.len() {
                    return Err(tonic::Status::data_loss(
                        "server sent more bytes than asked",
                    ));
                }
                out[at..end].copy_from_slice(&chunk.data);
                at = end;
            }
            if at != out.len() {
                return Err(tonic::Status::data_loss(format!(
                    "server sent {at} of {} bytes",
                    out.len()
                )));
            }
            Ok(())
        })
    }

    /// Sets `size` bytes at `offset` within `tensor` to `value`.
    pub fn memset(
        &self,
        b: &RemoteBuffer,
        tensor: &TensorDesc,
        value: u8,
        offset: u64,
        size: u64,
    ) -> Result<(), RemoteError> {
        let packed = encode_desc(tensor);
        self.with("memset", async |c| {
            self.check_session(c, b)?;
            queue::check_range("memset", tensor, b.size, offset, size)
                .map_err(tonic::Status::invalid_argument)?;
            c.room_for(0).await?;
            let op = pb::MemsetRequest {
                handle: b.handle,
                tensor: packed,
                value: value.into(),
                offset,
                size,
            };
            c.pending.push(Op::Memset(op), 0);
            Ok(())
        })
    }

    /// Sets every byte of a buffer to `value`.
    pub fn clear(&self, b: &RemoteBuffer, value: u8) -> Result<(), RemoteError> {
        self.with("clear", async |c| {
            self.check_session(c, b)?;
            c.room_for(0).await?;
            let op = pb::ClearRequest {
                handle: b.handle,
                value: value.into(),
            };
            c.pending.push(Op::Clear(op), 0);
            Ok(())
        })
    }
}

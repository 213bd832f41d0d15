//! The memory checks every backend makes at the plugin boundary, written
//! once: a table of the buffers a plugin handed out and still holds
//! ([`LiveBuffers`]), the range check of a `set_tensor` / `get_tensor` /
//! `memset_tensor` call ([`check_access`]), and "this tensor lies inside a
//! live buffer" for every tensor of a graph ([`LiveTable::locate`]).
//!
//! Buffers are keyed by the id the plugin gave the host
//! ([`Buffer::id`](crate::plugin::Buffer::id)), which the host writes into
//! [`TensorDesc::buffer`]. What a backend keeps per buffer besides its size
//! (a flag, a host address, a GPU buffer object) is the table's type
//! parameter. A tensor's bytes are its
//! [`checked_nbytes`](TensorDesc::checked_nbytes) from its offset.
//!
//! Every refusal is a [`MemoryError`] with one wording, naming the tensor,
//! the buffer id, the offset, the length and what it ran into; it converts
//! into a [`PluginError`] of kind `BAD_INPUT`.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard};

use crate::plugin::PluginError;
use crate::tensor::TensorDesc;

/// What a [`LiveBuffers`] table knows of one buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Live<T> {
    /// Size in bytes the buffer was allocated with (tensors must end by it).
    pub size: u64,
    /// What the backend keeps besides.
    pub data: T,
}

/// Why bytes a tensor names are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No live buffer of this table has the tensor's buffer id.
    NotLive,
    /// The tensor lives in another buffer than the one called.
    OtherBuffer {
        /// Id of the buffer whose method was called.
        called: u64,
    },
    /// Offset plus length (or the tensor's shape and strides) overflow
    /// 64-bit byte counts.
    Overflow,
    /// The bytes end past the end of the buffer.
    PastBuffer {
        /// The buffer's size in bytes.
        size: u64,
    },
    /// An access ends past the end of the tensor.
    PastTensor {
        /// The tensor's bytes ([`TensorDesc::checked_nbytes`]).
        extent: u64,
    },
}

/// A refused tensor or access, with everything its message names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryError {
    /// Index of the tensor in its graph, when it is one of a graph.
    pub tensor: Option<usize>,
    /// Which buffers the table holds (`"cpu"`, `"gpu0"`).
    pub kind: String,
    /// The tensor's buffer id.
    pub buffer: u64,
    /// The tensor's byte offset in its buffer.
    pub tensor_offset: u64,
    /// For an access, its byte offset into the tensor; `None` when the
    /// whole tensor is checked.
    pub access_offset: Option<u64>,
    /// Bytes checked (`None` when the tensor's own size overflows).
    pub len: Option<u64>,
    /// What went wrong.
    pub refusal: Refusal,
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.tensor {
            Some(i) => write!(f, "tensor {i}: ")?,
            None => write!(f, "tensor: ")?,
        }
        match self.len {
            Some(n) => write!(f, "{n} bytes")?,
            None => write!(f, "bytes")?,
        }
        if let Some(a) = self.access_offset {
            write!(f, " at offset {a} into the tensor")?;
        }
        write!(
            f,
            " at offset {} of buffer {:#x} ",
            self.tensor_offset, self.buffer
        )?;
        let kind = &self.kind;
        match self.refusal {
            Refusal::NotLive => {
                write!(f, "are not inside a live {kind} buffer (no such buffer)")
            }
            Refusal::OtherBuffer { called } => {
                write!(
                    f,
                    "are not in {kind} buffer {called:#x}, whose method was called"
                )
            }
            Refusal::Overflow => write!(
                f,
                "are not inside a live {kind} buffer (the end overflows 64-bit byte counts)"
            ),
            Refusal::PastBuffer { size } => write!(
                f,
                "are not inside a live {kind} buffer (it has {size} bytes)"
            ),
            Refusal::PastTensor { extent } => {
                write!(f, "run past the end of the {extent}-byte tensor")
            }
        }
    }
}

impl std::error::Error for MemoryError {}

impl From<MemoryError> for PluginError {
    fn from(e: MemoryError) -> PluginError {
        PluginError::bad_input(e.to_string())
    }
}

/// The refusal of `tensor` (index `index` of a graph, if any), checked in
/// a table of `kind` buffers.
fn refuse(
    kind: &str,
    index: Option<usize>,
    tensor: &TensorDesc,
    access_offset: Option<u64>,
    len: Option<u64>,
    refusal: Refusal,
) -> MemoryError {
    MemoryError {
        tensor: index,
        kind: kind.to_string(),
        buffer: tensor.buffer,
        tensor_offset: tensor.offset,
        access_offset,
        len,
        refusal,
    }
}

/// Where `tensor` (index `index` of a graph, if any) lies in a buffer of
/// `size` bytes: its byte range `start..end`, or why it does not fit.
fn tensor_range(
    kind: &str,
    index: Option<usize>,
    tensor: &TensorDesc,
    size: u64,
) -> Result<(u64, u64), MemoryError> {
    let extent = tensor.checked_nbytes();
    let end = extent.and_then(|n| tensor.offset.checked_add(n));
    match end {
        None => Err(refuse(kind, index, tensor, None, extent, Refusal::Overflow)),
        Some(end) if end > size => Err(refuse(
            kind,
            index,
            tensor,
            None,
            extent,
            Refusal::PastBuffer { size },
        )),
        Some(end) => Ok((tensor.offset, end)),
    }
}

/// Checks a `set_tensor` / `get_tensor` / `memset_tensor` of `len` bytes
/// at byte `offset` into `tensor`, called on the `kind` buffer `id` of
/// `size` bytes: the tensor must name that buffer, lie inside it, and the
/// access must stay inside the tensor. Returns the access's first byte in
/// the buffer.
pub fn check_access(
    kind: &str,
    id: u64,
    size: u64,
    tensor: &TensorDesc,
    offset: u64,
    len: u64,
) -> Result<u64, MemoryError> {
    let refusal = |r| refuse(kind, None, tensor, Some(offset), Some(len), r);
    if tensor.buffer != id {
        return Err(refusal(Refusal::OtherBuffer { called: id }));
    }
    let (start, _) = tensor_range(kind, None, tensor, size).map_err(|e| MemoryError {
        access_offset: Some(offset),
        len: Some(len),
        ..e
    })?;
    let extent = tensor.checked_nbytes().unwrap_or(u64::MAX);
    match offset.checked_add(len) {
        None => Err(refusal(Refusal::Overflow)),
        Some(end) if end > extent => Err(refusal(Refusal::PastTensor { extent })),
        // Inside the tensor, which lies inside the buffer: no overflow.
        Some(_) => Ok(start + offset),
    }
}

/// The live buffers of one plugin (or one device), by id, with what the
/// backend keeps for each. Buffers [`insert`](Self::insert) themselves
/// when allocated and [`remove`](Self::remove) themselves when dropped.
#[derive(Debug)]
pub struct LiveBuffers<T> {
    kind: String,
    table: Mutex<HashMap<u64, Live<T>>>,
}

impl<T> LiveBuffers<T> {
    /// An empty table of `kind` buffers (the word refusals use: `"cpu"`,
    /// the buffer type's or device's name).
    pub fn new(kind: impl Into<String>) -> LiveBuffers<T> {
        LiveBuffers {
            kind: kind.into(),
            table: Mutex::new(HashMap::new()),
        }
    }

    /// Which buffers the table holds.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// Records buffer `id` of `size` bytes; returns what an earlier buffer
    /// of that id had (ids are unique while a buffer lives, so `None`).
    pub fn insert(&self, id: u64, size: u64, data: T) -> Option<Live<T>> {
        self.lock().table.insert(id, Live { size, data })
    }

    /// Forgets buffer `id` (when it is freed); what it had, if it was live.
    pub fn remove(&self, id: u64) -> Option<Live<T>> {
        self.lock().table.remove(&id)
    }

    /// The table, locked once for many lookups (a panic elsewhere does not
    /// poison it).
    pub fn lock(&self) -> LiveTable<'_, T> {
        LiveTable {
            kind: &self.kind,
            table: self.table.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }
}

impl<T: Clone> LiveBuffers<T> {
    /// Buffer `id`, if live.
    pub fn get(&self, id: u64) -> Option<Live<T>> {
        self.lock().get(id).cloned()
    }

    /// The live buffer `tensor` (index `index` of a graph, if any) lies
    /// inside, whole; otherwise why not.
    pub fn locate(
        &self,
        index: Option<usize>,
        tensor: &TensorDesc,
    ) -> Result<Live<T>, MemoryError> {
        self.lock().locate(index, tensor).cloned()
    }
}

/// A locked [`LiveBuffers`].
pub struct LiveTable<'a, T> {
    kind: &'a str,
    table: MutexGuard<'a, HashMap<u64, Live<T>>>,
}

impl<T> LiveTable<'_, T> {
    /// Buffer `id`, if live.
    pub fn get(&self, id: u64) -> Option<&Live<T>> {
        self.table.get(&id)
    }

    /// The live buffer `tensor` (index `index` of a graph, if any) lies
    /// inside, whole: its buffer id is live and offset plus
    /// [`checked_nbytes`](TensorDesc::checked_nbytes) ends by the buffer's
    /// size; otherwise why not.
    pub fn locate(
        &self,
        index: Option<usize>,
        tensor: &TensorDesc,
    ) -> Result<&Live<T>, MemoryError> {
        let Some(live) = self.table.get(&tensor.buffer) else {
            let len = tensor.checked_nbytes();
            return Err(refuse(
                self.kind,
                index,
                tensor,
                None,
                len,
                Refusal::NotLive,
            ));
        };
        tensor_range(self.kind, index, tensor, live.size)?;
        Ok(live)
    }

    /// Checks that every allocated tensor of `graph` (`buffer != 0`) lies
    /// inside a live buffer, calling `visit(index, tensor, live)` for each;
    /// the first refusal ends the walk.
    pub fn check_graph(
        &self,
        graph: &[TensorDesc],
        mut visit: impl FnMut(usize, &TensorDesc, &Live<T>),
    ) -> Result<(), MemoryError> {
        for (i, t) in graph.iter().enumerate() {
            if t.buffer != 0 {
                visit(i, t, self.locate(Some(i), t)?);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DType;

    /// 16 f32 (64 bytes) at `offset` of buffer `buffer`.
    fn tensor(buffer: u64, offset: u64) -> TensorDesc {
        let mut t = TensorDesc::new(DType::F32, [16, 1, 1, 1]);
        t.buffer = buffer;
        t.offset = offset;
        t
    }

    fn table() -> LiveBuffers<&'static str> {
        let t = LiveBuffers::new("cpu");
        t.insert(0x1000, 256, "weights");
        t
    }

    #[test]
    fn a_tensor_inside_a_live_buffer_is_found_with_its_data() {
        let live = table().locate(Some(3), &tensor(0x1000, 192)).unwrap();
        assert_eq!(
            live,
            Live {
                size: 256,
                data: "weights"
            }
        );
    }

    #[test]
    fn a_tensor_in_an_unknown_buffer_is_refused_naming_the_id() {
        let e = table().locate(Some(3), &tensor(0x2000, 0)).unwrap_err();
        assert_eq!(e.refusal, Refusal::NotLive);
        assert_eq!(
            e.to_string(),
            "tensor 3: 64 bytes at offset 0 of buffer 0x2000 are not inside a live cpu buffer (no such buffer)"
        );
    }

    #[test]
    fn a_tensor_running_past_its_buffer_is_refused_naming_the_size() {
        let e = table().locate(Some(1), &tensor(0x1000, 200)).unwrap_err();
        assert_eq!(e.refusal, Refusal::PastBuffer { size: 256 });
        assert_eq!(
            e.to_string(),
            "tensor 1: 64 bytes at offset 200 of buffer 0x1000 are not inside a live cpu buffer (it has 256 bytes)"
        );
    }

    #[test]
    fn offsets_and_shapes_that_overflow_are_refused_not_wrapped() {
        let e = table()
            .locate(Some(0), &tensor(0x1000, u64::MAX - 8))
            .unwrap_err();
        assert_eq!(e.refusal, Refusal::Overflow);
        assert!(
            e.to_string().contains("overflows 64-bit byte counts"),
            "{e}"
        );
        let mut huge = tensor(0x1000, 0);
        huge.ne[1] = i64::MAX;
        huge.nb[1] = 1 << 40;
        let e = table().locate(Some(0), &huge).unwrap_err();
        assert_eq!(e.refusal, Refusal::Overflow);
        assert_eq!(e.len, None);
    }

    #[test]
    fn a_freed_buffer_is_no_longer_live() {
        let t = table();
        assert_eq!(t.remove(0x1000).map(|l| l.size), Some(256));
        let e = t.locate(None, &tensor(0x1000, 0)).unwrap_err();
        assert_eq!(e.refusal, Refusal::NotLive);
    }

    #[test]
    fn check_graph_visits_allocated_tensors_and_stops_at_the_first_refusal() {
        let t = table();
        let graph = [tensor(0x1000, 0), tensor(0, 0), tensor(0x1000, 64)];
        let mut seen = Vec::new();
        t.lock()
            .check_graph(&graph, |i, _, live| seen.push((i, live.data)))
            .unwrap();
        assert_eq!(seen, [(0, "weights"), (2, "weights")]);
        let bad = [tensor(0x1000, 0), tensor(0x1000, 250)];
        let e = t.lock().check_graph(&bad, |_, _, _| {}).unwrap_err();
        assert_eq!(e.tensor, Some(1));
    }

    #[test]
    fn an_access_inside_the_tensor_gives_its_first_byte_in_the_buffer() {
        assert_eq!(
            check_access("cpu", 0x1000, 256, &tensor(0x1000, 64), 8, 16),
            Ok(72)
        );
        assert_eq!(
            check_access("cpu", 0x1000, 256, &tensor(0x1000, 64), 64, 0),
            Ok(128)
        );
    }

    #[test]
    fn an_access_to_another_buffers_tensor_is_refused_naming_both() {
        let e = check_access("gpu0", 0x1000, 256, &tensor(0x2000, 0), 0, 4).unwrap_err();
        assert_eq!(e.refusal, Refusal::OtherBuffer { called: 0x1000 });
        assert_eq!(
            e.to_string(),
            "tensor: 4 bytes at offset 0 into the tensor at offset 0 of buffer 0x2000 are not in gpu0 buffer 0x1000, whose method was called"
        );
    }

    #[test]
    fn an_access_past_the_tensor_is_refused_naming_its_extent() {
        let e = check_access("cpu", 0x1000, 256, &tensor(0x1000, 0), 60, 8).unwrap_err();
        assert_eq!(e.refusal, Refusal::PastTensor { extent: 64 });
        assert_eq!(
            e.to_string(),
            "tensor: 8 bytes at offset 60 into the tensor at offset 0 of buffer 0x1000 run past the end of the 64-byte tensor"
        );
    }

    #[test]
    fn an_access_to_a_tensor_past_the_buffer_is_refused_naming_the_size() {
        let e = check_access("cpu", 0x1000, 100, &tensor(0x1000, 64), 0, 4).unwrap_err();
        assert_eq!(e.refusal, Refusal::PastBuffer { size: 100 });
        assert!(e.to_string().contains("(it has 100 bytes)"), "{e}");
    }

    #[test]
    fn an_access_whose_end_overflows_is_refused() {
        let e = check_access("cpu", 0x1000, 256, &tensor(0x1000, 0), u64::MAX, 2).unwrap_err();
        assert_eq!(e.refusal, Refusal::Overflow);
        let e = check_access("cpu", 0x1000, 256, &tensor(0x1000, u64::MAX), 0, 1).unwrap_err();
        assert_eq!(e.refusal, Refusal::Overflow);
    }

    #[test]
    fn refusals_are_bad_input_errors_with_the_same_words() {
        let e = table().locate(Some(3), &tensor(0x2000, 0)).unwrap_err();
        let p = PluginError::from(e.clone());
        assert_eq!(p.kind, crate::plugin::error_kind::BAD_INPUT);
        assert_eq!(p.message.as_str(), e.to_string());
    }
}

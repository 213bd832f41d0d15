//! Bind groups reused across dispatches and graphs.
//!
//! A decode step runs the same kernels on the same tensors every token, and
//! a bind group costs more CPU time to create than the rest of a dispatch
//! to record, so bind groups are kept per (storage ranges, parameter
//! buffer); the parameter slot is a dynamic offset, not part of the key.
//! Every pipeline with n storage bindings shares one layout, so a cached
//! bind group fits any of them. Entries hold their buffers alive, so the
//! cache is emptied whenever a buffer is freed or scratch memory is
//! replaced, and when it reaches [`BIND_CACHE_CAP`] entries.
//! `BACKPLANE_WEBGPU_BIND_CACHE=0` turns it off (for measuring it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::{PARAM_SLOT_BYTES, lock};

/// A storage binding of a tensor (or scratch memory): the buffer range
/// starting at the offset rounded down to `min_storage_buffer_offset_alignment`,
/// and the remainder in bytes, which the kernel adds to its indices.
#[derive(Clone)]
pub struct Binding {
    /// The buffer.
    pub buffer: Arc<wgpu::Buffer>,
    /// Aligned byte offset of the binding.
    pub offset: u64,
    /// Byte size of the binding (a multiple of 4).
    pub size: u64,
    /// Bytes from the binding start to the tensor's first byte.
    pub rem_bytes: u64,
}

impl Binding {
    /// The remainder in elements of `elem_bytes` bytes, for kernels that
    /// index typed arrays.
    pub fn elem_offset(&self, elem_bytes: u64) -> Result<u32, String> {
        if !self.rem_bytes.is_multiple_of(elem_bytes) {
            return Err(format!(
                "tensor offset remainder {} is not a multiple of {elem_bytes} bytes",
                self.rem_bytes
            ));
        }
        Ok((self.rem_bytes / elem_bytes) as u32)
    }

    /// Whether two bindings cover overlapping bytes of one buffer.
    pub fn overlaps(&self, other: &Binding) -> bool {
        Arc::ptr_eq(&self.buffer, &other.buffer)
            && self.offset < other.offset + other.size
            && other.offset < self.offset + self.size
    }
}

/// Most bind groups kept before the cache starts over.
pub const BIND_CACHE_CAP: usize = 4096;

#[derive(PartialEq, Eq, Hash)]
struct BindKey {
    ranges: Vec<(wgpu::Buffer, u64, u64)>,
    params: wgpu::Buffer,
}

/// The cache of one device.
pub struct BindGroupCache {
    map: Mutex<HashMap<BindKey, wgpu::BindGroup>>,
    enabled: bool,
}

impl BindGroupCache {
    /// An empty cache; with `enabled` false (the `bind_cache` option off)
    /// every lookup builds a new bind group.
    pub fn new(enabled: bool) -> BindGroupCache {
        BindGroupCache {
            map: Mutex::default(),
            enabled,
        }
    }

    /// The bind group of `bindings` (storage, in order) and one
    /// [`PARAM_SLOT_BYTES`] slot of `params` at a dynamic offset, for a
    /// pipeline whose layout is `layout`.
    pub fn get(
        &self,
        device: &wgpu::Device,
        layout: &wgpu::BindGroupLayout,
        bindings: &[Binding],
        params: &wgpu::Buffer,
    ) -> wgpu::BindGroup {
        let key = BindKey {
            ranges: bindings
                .iter()
                .map(|b| ((*b.buffer).clone(), b.offset, b.size))
                .collect(),
            params: params.clone(),
        };
        if self.enabled
            && let Some(bg) = lock(&self.map).get(&key)
        {
            return bg.clone();
        }
        let mut entries: Vec<wgpu::BindGroupEntry> = bindings
            .iter()
            .enumerate()
            .map(|(i, b)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                    buffer: &b.buffer,
                    offset: b.offset,
                    size: wgpu::BufferSize::new(b.size),
                }),
            })
            .collect();
        entries.push(wgpu::BindGroupEntry {
            binding: bindings.len() as u32,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: params,
                offset: 0,
                size: wgpu::BufferSize::new(PARAM_SLOT_BYTES),
            }),
        });
        let bg = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout,
            entries: &entries,
        });
        if self.enabled {
            let mut map = lock(&self.map);
            if map.len() >= BIND_CACHE_CAP {
                map.clear();
            }
            map.insert(key, bg.clone());
        }
        bg
    }

    /// Drops every cached bind group (and with them the buffer handles
    /// they hold).
    pub fn clear(&self) {
        lock(&self.map).clear();
    }
}

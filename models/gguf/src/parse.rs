//! Parsing the header, metadata and tensor table out of a byte slice.
//!
//! Every count and length read from the file is checked against the bytes
//! that remain before anything is allocated for it, so a hostile file can
//! make the parser allocate at most a small constant times its own size.

use std::collections::HashMap;

use backplane_abi::DType;

use crate::error::GgufError;
use crate::value::{Array, Value, type_code, type_code_name};
use crate::{DEFAULT_ALIGNMENT, GGUF_MAGIC, TensorInfo};

/// Deepest array nesting accepted (an array of arrays of ... 8 levels).
pub const MAX_ARRAY_DEPTH: u32 = 8;
/// Longest tensor name ggml accepts, in bytes (`GGML_MAX_NAME` - 1).
pub const MAX_TENSOR_NAME_LEN: usize = 63;
/// The metadata key that sets the data alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";

/// Fewest bytes one key-value pair takes: key length, one key byte, value
/// type, a one-byte value.
const MIN_KV_BYTES: u64 = 8 + 1 + 4 + 1;
/// Fewest bytes one tensor entry takes: name length, n_dims, one ne, type,
/// offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 8 + 4 + 8;

/// What the parser found: everything [`crate::Gguf`] keeps but the bytes.
pub(crate) struct Parsed {
    pub version: u32,
    pub alignment: u64,
    pub data_offset: u64,
    pub metadata: Vec<(String, Value)>,
    pub value_offsets: Vec<u64>,
    pub key_index: HashMap<String, usize>,
    pub tensors: Vec<TensorInfo>,
    pub tensor_index: HashMap<String, usize>,
}

/// Bytes one encoded element of `code` takes at least (strings: their
/// length prefix; arrays: their type and count).
fn min_encoded_size(code: u32) -> u64 {
    match code {
        type_code::U8 | type_code::I8 | type_code::BOOL => 1,
        type_code::U16 | type_code::I16 => 2,
        type_code::U32 | type_code::I32 | type_code::F32 => 4,
        type_code::U64 | type_code::I64 | type_code::F64 | type_code::STRING => 8,
        _ => 12,
    }
}

/// ggml's name for a type code this crate does not decode, for error text.
fn ggml_type_name(code: u32) -> &'static str {
    match code {
        4 | 5 => "a removed q4_2/q4_3 format",
        16 => "iq2_xxs",
        17 => "iq2_xs",
        18 => "iq3_xxs",
        19 => "iq1_s",
        20 => "iq4_nl",
        21 => "iq3_s",
        22 => "iq2_s",
        23 => "iq4_xs",
        28 => "f64",
        29 => "iq1_m",
        31..=33 | 36..=38 => "a removed repacked format",
        34 => "tq1_0",
        35 => "tq2_0",
        39 => "mxfp4",
        40 => "nvfp4",
        41 => "q1_0",
        42 => "q2_0",
        _ => "not a ggml type",
    }
}

/// A read position over the file's bytes.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

type Field<'f> = &'f dyn Fn() -> String;

impl<'a> Cursor<'a> {
    fn file_size(&self) -> u64 {
        self.bytes.len() as u64
    }

    fn offset(&self) -> u64 {
        self.pos as u64
    }

    fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    fn truncated(&self, field: Field<'_>, need: u64) -> GgufError {
        GgufError::Truncated {
            field: field(),
            offset: self.offset(),
            need,
            file_size: self.file_size(),
        }
    }

    /// The next `n` bytes, or a `Truncated` error naming `field`.
    fn take(&mut self, n: u64, field: Field<'_>) -> Result<&'a [u8], GgufError> {
        if n > self.remaining() {
            return Err(self.truncated(field, n));
        }
        let start = self.pos;
        // n <= remaining, which is a usize.
        self.pos += n as usize;
        Ok(&self.bytes[start..self.pos])
    }

    fn array_of<const N: usize>(&mut self, field: Field<'_>) -> Result<[u8; N], GgufError> {
        let bytes = self.take(N as u64, field)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    fn u32(&mut self, field: Field<'_>) -> Result<u32, GgufError> {
        self.array_of(field).map(u32::from_le_bytes)
    }

    fn u64(&mut self, field: Field<'_>) -> Result<u64, GgufError> {
        self.array_of(field).map(u64::from_le_bytes)
    }

    fn i64(&mut self, field: Field<'_>) -> Result<i64, GgufError> {
        self.array_of(field).map(i64::from_le_bytes)
    }

    /// A GGUF string: u64 length, then that many UTF-8 bytes.
    fn string(&mut self, field: Field<'_>) -> Result<String, GgufError> {
        let len = self.u64(field)?;
        let start = self.offset();
        let bytes = self.take(len, field)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(GgufError::Invalid {
                field: field(),
                offset: start,
                reason: format!(
                    "string of {len} bytes is not valid UTF-8 (bad byte at string offset {})",
                    e.valid_up_to()
                ),
            }),
        }
    }

    /// A value of type `code`; `field` names it, `depth` counts enclosing arrays.
    fn value(&mut self, code: u32, depth: u32, field: Field<'_>) -> Result<Value, GgufError> {
        Ok(match code {
            type_code::U8 => Value::U8(u8::from_le_bytes(self.array_of(field)?)),
            type_code::I8 => Value::I8(i8::from_le_bytes(self.array_of(field)?)),
            type_code::U16 => Value::U16(u16::from_le_bytes(self.array_of(field)?)),
            type_code::I16 => Value::I16(i16::from_le_bytes(self.array_of(field)?)),
            type_code::U32 => Value::U32(u32::from_le_bytes(self.array_of(field)?)),
            type_code::I32 => Value::I32(i32::from_le_bytes(self.array_of(field)?)),
            type_code::U64 => Value::U64(u64::from_le_bytes(self.array_of(field)?)),
            type_code::I64 => Value::I64(i64::from_le_bytes(self.array_of(field)?)),
            type_code::F32 => Value::F32(f32::from_le_bytes(self.array_of(field)?)),
            type_code::F64 => Value::F64(f64::from_le_bytes(self.array_of(field)?)),
            type_code::BOOL => Value::Bool(self.array_of::<1>(field)?[0] != 0),
            type_code::STRING => Value::String(self.string(field)?),
            _ => {
                let element = |i: u64| format!("{} value[{i}]", field());
                Value::Array(self.array(depth, field, &element)?)
            }
        })
    }

    /// An array: u32 element type, u64 count, elements. `element(i)` names
    /// element i in errors.
    fn array(
        &mut self,
        depth: u32,
        field: Field<'_>,
        element: &dyn Fn(u64) -> String,
    ) -> Result<Array, GgufError> {
        let type_offset = self.offset();
        let elem = self.u32(&|| format!("{} element type", field()))?;
        if type_code_name(elem).is_none() {
            return Err(GgufError::Invalid {
                field: format!("{} element type", field()),
                offset: type_offset,
                reason: format!("unknown value type code {elem} (valid: 0..=12)"),
            });
        }
        if elem == type_code::ARRAY && depth + 1 >= MAX_ARRAY_DEPTH {
            return Err(GgufError::Invalid {
                field: format!("{} element type", field()),
                offset: type_offset,
                reason: format!("arrays nest deeper than {MAX_ARRAY_DEPTH} levels"),
            });
        }
        let count_offset = self.offset();
        let count = self.u64(&|| format!("{} count", field()))?;
        let min_bytes = count.saturating_mul(min_encoded_size(elem));
        if min_bytes > self.remaining() {
            return Err(GgufError::Truncated {
                field: format!(
                    "{} ({count} elements of {})",
                    field(),
                    type_code_name(elem).unwrap_or("?")
                ),
                offset: count_offset + 8,
                need: min_bytes,
                file_size: self.file_size(),
            });
        }
        // Bounded by the bytes left: count * min_encoded_size <= remaining.
        let n = count as usize;
        macro_rules! fixed {
            ($variant:ident, $ty:ty) => {{
                const SIZE: usize = std::mem::size_of::<$ty>();
                let bytes = self.take(min_bytes, field)?;
                Array::$variant(
                    bytes
                        .chunks_exact(SIZE)
                        .map(|c| {
                            let mut a = [0u8; SIZE];
                            a.copy_from_slice(c);
                            <$ty>::from_le_bytes(a)
                        })
                        .collect(),
                )
            }};
        }
        Ok(match elem {
            type_code::U8 => Array::U8(self.take(min_bytes, field)?.to_vec()),
            type_code::I8 => fixed!(I8, i8),
            type_code::U16 => fixed!(U16, u16),
            type_code::I16 => fixed!(I16, i16),
            type_code::U32 => fixed!(U32, u32),
            type_code::I32 => fixed!(I32, i32),
            type_code::U64 => fixed!(U64, u64),
            type_code::I64 => fixed!(I64, i64),
            type_code::F32 => fixed!(F32, f32),
            type_code::F64 => fixed!(F64, f64),
            type_code::BOOL => Array::Bool(
                self.take(min_bytes, field)?
                    .iter()
                    .map(|&b| b != 0)
                    .collect(),
            ),
            type_code::STRING => {
                let mut out = Vec::with_capacity(n);
                for i in 0..count {
                    out.push(self.string(&|| element(i))?);
                }
                Array::String(out)
            }
            _ => {
                let mut out = Vec::with_capacity(n);
                for i in 0..count {
                    let inner = |j: u64| format!("{}[{j}]", element(i));
                    out.push(self.array(depth + 1, &|| element(i), &inner)?);
                }
                Array::Array(out)
            }
        })
    }
}

/// `text`, cut to its first 80 characters for an error message.
pub(crate) fn shorten(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

fn invalid(field: impl Into<String>, offset: u64, reason: impl Into<String>) -> GgufError {
    GgufError::Invalid {
        field: field.into(),
        offset,
        reason: reason.into(),
    }
}

/// Reads magic, version, counts, metadata and the tensor table, and checks
/// every tensor's data lies aligned, inside the file and apart from the others.
pub(crate) fn parse(bytes: &[u8]) -> Result<Parsed, GgufError> {
    let mut cur = Cursor { bytes, pos: 0 };
    let magic = cur.take(4, &|| "magic".into())?;
    if magic != GGUF_MAGIC {
        return Err(invalid(
            "magic",
            0,
            format!(
                "expected \"GGUF\", found {:?}: not a GGUF file",
                String::from_utf8_lossy(magic)
            ),
        ));
    }
    let version = cur.u32(&|| "version".into())?;
    match version {
        2 | 3 => {}
        1 => {
            return Err(invalid(
                "version",
                4,
                "GGUF version 1 is not supported (only 2 and 3)",
            ));
        }
        v if matches!(v.swap_bytes(), 1..=3) => {
            return Err(invalid(
                "version",
                4,
                format!(
                    "version {v} reads as {} byte-swapped: big-endian GGUF files are not supported",
                    v.swap_bytes()
                ),
            ));
        }
        v => {
            return Err(invalid(
                "version",
                4,
                format!("unsupported GGUF version {v} (supported: 2 and 3)"),
            ));
        }
    }
    let tensor_count = cur.u64(&|| "tensor_count".into())?;
    let kv_count = cur.u64(&|| "kv_count".into())?;
    if kv_count.saturating_mul(MIN_KV_BYTES) > cur.remaining() {
        return Err(invalid(
            "kv_count",
            16,
            format!(
                "{kv_count} key-value pairs need at least {} bytes, only {} remain",
                kv_count.saturating_mul(MIN_KV_BYTES),
                cur.remaining()
            ),
        ));
    }

    let n_kv = kv_count as usize;
    let mut metadata = Vec::with_capacity(n_kv);
    let mut value_offsets = Vec::with_capacity(n_kv);
    let mut key_index: HashMap<String, usize> = HashMap::with_capacity(n_kv);
    for i in 0..n_kv {
        let key_offset = cur.offset();
        let key = cur.string(&|| format!("kv[{i}].key"))?;
        if key.is_empty() {
            return Err(invalid(format!("kv[{i}].key"), key_offset, "key is empty"));
        }
        if let Some(&first) = key_index.get(&key) {
            return Err(invalid(
                format!("kv[{i}] '{key}'"),
                key_offset,
                format!("duplicate key (first defined by kv[{first}])"),
            ));
        }
        let type_offset = cur.offset();
        let code = cur.u32(&|| format!("kv[{i}] '{key}' type"))?;
        if type_code_name(code).is_none() {
            return Err(invalid(
                format!("kv[{i}] '{key}' type"),
                type_offset,
                format!("unknown value type code {code} (valid: 0..=12)"),
            ));
        }
        let value_offset = cur.offset();
        let value = cur.value(code, 0, &|| format!("kv[{i}] '{key}'"))?;
        key_index.insert(key.clone(), i);
        metadata.push((key, value));
        value_offsets.push(value_offset);
    }

    let alignment = match key_index.get(ALIGNMENT_KEY) {
        None => DEFAULT_ALIGNMENT,
        Some(&i) => {
            let field = format!("kv[{i}] '{ALIGNMENT_KEY}'");
            match metadata[i].1 {
                Value::U32(a) if a.is_power_of_two() => u64::from(a),
                Value::U32(a) => {
                    return Err(invalid(
                        field,
                        value_offsets[i],
                        format!("alignment {a} is not a non-zero power of two"),
                    ));
                }
                ref other => {
                    return Err(invalid(
                        field,
                        value_offsets[i],
                        format!("alignment must be a u32, found {}", other.type_name()),
                    ));
                }
            }
        }
    };

    let tensors_start = cur.offset();
    if tensor_count.saturating_mul(MIN_TENSOR_INFO_BYTES) > cur.remaining() {
        return Err(invalid(
            "tensor_count",
            8,
            format!(
                "{tensor_count} tensor entries need at least {} bytes from byte {tensors_start}, only {} remain",
                tensor_count.saturating_mul(MIN_TENSOR_INFO_BYTES),
                cur.remaining()
            ),
        ));
    }
    let n_tensors = tensor_count as usize;
    let mut tensors = Vec::with_capacity(n_tensors);
    let mut offset_fields = Vec::with_capacity(n_tensors);
    let mut tensor_index: HashMap<String, usize> = HashMap::with_capacity(n_tensors);
    for i in 0..n_tensors {
        let (info, offset_field) = read_tensor_info(&mut cur, i, alignment, &tensor_index)?;
        tensor_index.insert(info.name.clone(), i);
        tensors.push(info);
        offset_fields.push(offset_field);
    }

    let table_end = cur.offset();
    // Like ggml, a file without tensors has no data section and needs no
    // padding after its table.
    let padded = table_end.div_ceil(alignment) * alignment;
    let data_offset = if tensors.is_empty() {
        table_end
    } else if padded <= cur.file_size() {
        padded
    } else {
        return Err(GgufError::Truncated {
            field: "padding before the tensor data".into(),
            offset: table_end,
            need: padded - table_end,
            file_size: cur.file_size(),
        });
    };
    check_tensor_extents(&tensors, &offset_fields, data_offset, cur.file_size())?;

    Ok(Parsed {
        version,
        alignment,
        data_offset,
        metadata,
        value_offsets,
        key_index,
        tensors,
        tensor_index,
    })
}

/// One tensor table entry; also returns the file offset of its offset field.
fn read_tensor_info(
    cur: &mut Cursor<'_>,
    i: usize,
    alignment: u64,
    seen: &HashMap<String, usize>,
) -> Result<(TensorInfo, u64), GgufError> {
    let name_offset = cur.offset();
    let name = cur.string(&|| format!("tensor[{i}].name"))?;
    if name.len() > MAX_TENSOR_NAME_LEN {
        return Err(invalid(
            format!("tensor[{i}].name"),
            name_offset,
            format!(
                "name '{}' is {} bytes; ggml allows at most {MAX_TENSOR_NAME_LEN}",
                shorten(&name),
                name.len()
            ),
        ));
    }
    if let Some(&first) = seen.get(&name) {
        return Err(invalid(
            format!("tensor[{i}] '{name}'"),
            name_offset,
            format!("duplicate tensor name (first used by tensor[{first}])"),
        ));
    }
    let at = |what: &str| format!("tensor[{i}] '{name}' {what}");
    let dims_offset = cur.offset();
    let n_dims = cur.u32(&|| at("n_dims"))?;
    if !(1..=4).contains(&n_dims) {
        return Err(invalid(
            at("n_dims"),
            dims_offset,
            format!("{n_dims} dimensions; must be 1..=4"),
        ));
    }
    let mut ne = [1i64; 4];
    let ne_offset = cur.offset();
    for (j, slot) in ne.iter_mut().enumerate().take(n_dims as usize) {
        let offset = cur.offset();
        let dim = cur.i64(&|| at(&format!("ne[{j}]")))?;
        if dim <= 0 {
            return Err(invalid(
                at(&format!("ne[{j}]")),
                offset,
                format!("dimension is {dim}; must be positive"),
            ));
        }
        *slot = dim;
    }
    let elements = ne.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d));
    if elements.is_none() {
        return Err(invalid(
            at("ne"),
            ne_offset,
            format!("element count of shape {ne:?} overflows i64"),
        ));
    }
    let type_offset = cur.offset();
    let code = cur.u32(&|| at("type"))?;
    let dtype = DType::from_code(code).map_err(|_| {
        invalid(
            at("type"),
            type_offset,
            format!(
                "unsupported ggml type code {code} ({})",
                ggml_type_name(code)
            ),
        )
    })?;
    let size_bytes =
        tensor_size_bytes(dtype, &ne).map_err(|reason| invalid(at("ne[0]"), ne_offset, reason))?;
    let offset_field = cur.offset();
    let offset = cur.u64(&|| at("offset"))?;
    if offset % alignment != 0 {
        return Err(invalid(
            at("offset"),
            offset_field,
            format!("data offset {offset} is not a multiple of the alignment {alignment}"),
        ));
    }
    let info = TensorInfo {
        name,
        dtype,
        n_dims,
        ne,
        offset,
        size_bytes,
    };
    Ok((info, offset_field))
}

/// `dtype.row_size(ne[0]) * ne[1] * ne[2] * ne[3]`, or why it cannot be had.
///
/// Computed here with checked arithmetic rather than through
/// `DType::row_size`, whose multiplication is unchecked for rows near
/// `usize::MAX / type_size`.
pub(crate) fn tensor_size_bytes(dtype: DType, ne: &[i64; 4]) -> Result<u64, String> {
    let block = dtype.block_size() as u64;
    let overflow = || format!("{dtype} tensor of shape {ne:?} has a byte size that overflows u64");
    let ne0 = u64::try_from(ne[0]).map_err(|_| format!("ne[0] = {} is negative", ne[0]))?;
    if !ne0.is_multiple_of(block) {
        return Err(format!(
            "a row of {ne0} elements is not a whole number of {dtype} blocks ({block} elements each)"
        ));
    }
    let row = (ne0 / block)
        .checked_mul(dtype.type_size() as u64)
        .ok_or_else(overflow)?;
    ne[1..]
        .iter()
        .try_fold(row, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
        .ok_or_else(overflow)
}

/// Every tensor's data must end inside the file and no two may overlap.
fn check_tensor_extents(
    tensors: &[TensorInfo],
    offset_fields: &[u64],
    data_offset: u64,
    file_size: u64,
) -> Result<(), GgufError> {
    let data_len = file_size - data_offset;
    for (i, t) in tensors.iter().enumerate() {
        let end = t.offset.checked_add(t.size_bytes);
        if end.is_none_or(|end| end > data_len) {
            return Err(GgufError::Truncated {
                field: format!("tensor[{i}] '{}' data", t.name),
                offset: data_offset.saturating_add(t.offset),
                need: t.size_bytes,
                file_size,
            });
        }
    }
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| tensors[i].offset);
    for pair in order.windows(2) {
        let (a, b) = (&tensors[pair[0]], &tensors[pair[1]]);
        if a.offset + a.size_bytes > b.offset {
            return Err(invalid(
                format!("tensor[{}] '{}' offset", pair[1], b.name),
                offset_fields[pair[1]],
                format!(
                    "data [{}, {}) overlaps tensor[{}] '{}' data [{}, {})",
                    b.offset,
                    b.offset + b.size_bytes,
                    pair[0],
                    a.name,
                    a.offset,
                    a.offset + a.size_bytes
                ),
            ));
        }
    }
    Ok(())
}

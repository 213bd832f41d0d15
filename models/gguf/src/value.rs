//! Metadata values: the thirteen GGUF value types and typed arrays.

/// GGUF value type codes, as stored in the file before each value.
pub mod type_code {
    /// `u8`.
    pub const U8: u32 = 0;
    /// `i8`.
    pub const I8: u32 = 1;
    /// `u16`.
    pub const U16: u32 = 2;
    /// `i16`.
    pub const I16: u32 = 3;
    /// `u32`.
    pub const U32: u32 = 4;
    /// `i32`.
    pub const I32: u32 = 5;
    /// `f32`.
    pub const F32: u32 = 6;
    /// `bool`, one byte.
    pub const BOOL: u32 = 7;
    /// A string: u64 byte length and UTF-8 bytes.
    pub const STRING: u32 = 8;
    /// An array: u32 element type, u64 count, elements.
    pub const ARRAY: u32 = 9;
    /// `u64`.
    pub const U64: u32 = 10;
    /// `i64`.
    pub const I64: u32 = 11;
    /// `f64`.
    pub const F64: u32 = 12;
}

/// The name of a GGUF value type code (`"u32"`, `"string"`, ...), or `None`
/// for codes outside 0..=12.
pub fn type_code_name(code: u32) -> Option<&'static str> {
    Some(match code {
        type_code::U8 => "u8",
        type_code::I8 => "i8",
        type_code::U16 => "u16",
        type_code::I16 => "i16",
        type_code::U32 => "u32",
        type_code::I32 => "i32",
        type_code::F32 => "f32",
        type_code::BOOL => "bool",
        type_code::STRING => "string",
        type_code::ARRAY => "array",
        type_code::U64 => "u64",
        type_code::I64 => "i64",
        type_code::F64 => "f64",
        _ => return None,
    })
}

/// A metadata value (GGUF value types 0..=12).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Type 0.
    U8(u8),
    /// Type 1.
    I8(i8),
    /// Type 2.
    U16(u16),
    /// Type 3.
    I16(i16),
    /// Type 4.
    U32(u32),
    /// Type 5.
    I32(i32),
    /// Type 10.
    U64(u64),
    /// Type 11.
    I64(i64),
    /// Type 6.
    F32(f32),
    /// Type 12.
    F64(f64),
    /// Type 7.
    Bool(bool),
    /// Type 8 (always valid UTF-8).
    String(String),
    /// Type 9.
    Array(Array),
}

/// A typed array value (arrays may nest).
#[derive(Clone, Debug, PartialEq)]
pub enum Array {
    /// Elements of type 0.
    U8(Vec<u8>),
    /// Elements of type 1.
    I8(Vec<i8>),
    /// Elements of type 2.
    U16(Vec<u16>),
    /// Elements of type 3.
    I16(Vec<i16>),
    /// Elements of type 4.
    U32(Vec<u32>),
    /// Elements of type 5.
    I32(Vec<i32>),
    /// Elements of type 10.
    U64(Vec<u64>),
    /// Elements of type 11.
    I64(Vec<i64>),
    /// Elements of type 6.
    F32(Vec<f32>),
    /// Elements of type 12.
    F64(Vec<f64>),
    /// Elements of type 7.
    Bool(Vec<bool>),
    /// Elements of type 8.
    String(Vec<String>),
    /// Elements of type 9: each inner array has its own element type.
    Array(Vec<Array>),
}

impl Value {
    /// The GGUF type code written before this value.
    pub fn type_code(&self) -> u32 {
        match self {
            Value::U8(_) => type_code::U8,
            Value::I8(_) => type_code::I8,
            Value::U16(_) => type_code::U16,
            Value::I16(_) => type_code::I16,
            Value::U32(_) => type_code::U32,
            Value::I32(_) => type_code::I32,
            Value::U64(_) => type_code::U64,
            Value::I64(_) => type_code::I64,
            Value::F32(_) => type_code::F32,
            Value::F64(_) => type_code::F64,
            Value::Bool(_) => type_code::BOOL,
            Value::String(_) => type_code::STRING,
            Value::Array(_) => type_code::ARRAY,
        }
    }

    /// The type's name: `"u32"`, `"string"`, or `"array<f32>"` style for arrays.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Array(a) => a.type_name(),
            other => type_code_name(other.type_code()).unwrap_or("unknown"),
        }
    }

    /// Any integer value that is not negative, widened to u64.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer value, widened to i128 (every GGUF integer fits).
    pub fn as_i128(&self) -> Option<i128> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v.into()),
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v.into()),
            _ => None,
        }
    }

    /// An F32 value, or an F64 value rounded to f32.
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            Value::F64(v) => Some(v as f32),
            _ => None,
        }
    }

    /// A string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// A bool value.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// An array value.
    pub fn as_array(&self) -> Option<&Array> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

impl Array {
    /// The GGUF type code of the elements.
    pub fn element_type_code(&self) -> u32 {
        match self {
            Array::U8(_) => type_code::U8,
            Array::I8(_) => type_code::I8,
            Array::U16(_) => type_code::U16,
            Array::I16(_) => type_code::I16,
            Array::U32(_) => type_code::U32,
            Array::I32(_) => type_code::I32,
            Array::U64(_) => type_code::U64,
            Array::I64(_) => type_code::I64,
            Array::F32(_) => type_code::F32,
            Array::F64(_) => type_code::F64,
            Array::Bool(_) => type_code::BOOL,
            Array::String(_) => type_code::STRING,
            Array::Array(_) => type_code::ARRAY,
        }
    }

    /// The array's type name, e.g. `"array<string>"`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Array::U8(_) => "array<u8>",
            Array::I8(_) => "array<i8>",
            Array::U16(_) => "array<u16>",
            Array::I16(_) => "array<i16>",
            Array::U32(_) => "array<u32>",
            Array::I32(_) => "array<i32>",
            Array::U64(_) => "array<u64>",
            Array::I64(_) => "array<i64>",
            Array::F32(_) => "array<f32>",
            Array::F64(_) => "array<f64>",
            Array::Bool(_) => "array<bool>",
            Array::String(_) => "array<string>",
            Array::Array(_) => "array<array>",
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            Array::U8(v) => v.len(),
            Array::I8(v) => v.len(),
            Array::U16(v) => v.len(),
            Array::I16(v) => v.len(),
            Array::U32(v) => v.len(),
            Array::I32(v) => v.len(),
            Array::U64(v) => v.len(),
            Array::I64(v) => v.len(),
            Array::F32(v) => v.len(),
            Array::F64(v) => v.len(),
            Array::Bool(v) => v.len(),
            Array::String(v) => v.len(),
            Array::Array(v) => v.len(),
        }
    }

    /// True when the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

macro_rules! value_from {
    ($($from:ty => $variant:ident),* $(,)?) => {
        $(impl From<$from> for Value {
            fn from(v: $from) -> Value {
                Value::$variant(v)
            }
        })*
    };
}

value_from!(
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
    u64 => U64, i64 => I64, f32 => F32, f64 => F64, bool => Bool,
    String => String, Array => Array,
);

macro_rules! value_from_vec {
    ($($elem:ty => $variant:ident),* $(,)?) => {
        $(impl From<Vec<$elem>> for Value {
            fn from(v: Vec<$elem>) -> Value {
                Value::Array(Array::$variant(v))
            }
        })*
    };
}

value_from_vec!(
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
    u64 => U64, i64 => I64, f32 => F32, f64 => F64, bool => Bool,
    String => String, Array => Array,
);

impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::String(v.to_owned())
    }
}

impl From<Vec<&str>> for Value {
    fn from(v: Vec<&str>) -> Value {
        Value::Array(Array::String(v.into_iter().map(str::to_owned).collect()))
    }
}

impl From<&Value> for Value {
    fn from(v: &Value) -> Value {
        v.clone()
    }
}

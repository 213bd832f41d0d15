//! External test vectors: cases read from a directory so anyone can check
//! backplane against another framework's outputs. The format is described
//! in docs/conformance.md.

use std::path::{Path, PathBuf};

use backplane::{Conv2dParams, DType, GluOp, Graph, Op, RopeParams, SortOrder, TensorId, UnaryOp};
use serde::Deserialize;

/// The manifest file's contents.
#[derive(Debug, Deserialize)]
pub struct Manifest {
    /// The cases.
    pub cases: Vec<VectorCase>,
}

/// One externally supplied case.
#[derive(Debug, Deserialize)]
pub struct VectorCase {
    /// Unique name.
    pub name: String,
    /// ggml op name (`MUL_MAT`, `ROPE`, ...).
    pub op: String,
    /// Op parameters: integers as i32, numbers with a fraction or exponent as f32.
    #[serde(default)]
    pub op_params: Vec<serde_json::Number>,
    /// Sources in ggml's slot order; `null` for an absent optional source.
    pub inputs: Vec<Option<TensorFile>>,
    /// The expected result.
    pub output: TensorFile,
    /// Largest NMSE accepted (default 1e-7).
    #[serde(default = "default_nmse")]
    pub nmse_max: f64,
}

fn default_nmse() -> f64 {
    1e-7
}

/// A tensor stored in a file.
#[derive(Debug, Deserialize)]
pub struct TensorFile {
    /// Type name (`f32`, `q4_0`, ...).
    pub dtype: String,
    /// Shape, 1 to 4 dims.
    pub ne: Vec<i64>,
    /// Byte strides (optional; contiguous when absent).
    #[serde(default)]
    pub nb: Option<Vec<u64>>,
    /// File relative to the manifest: raw little-endian bytes or `.npy`.
    pub file: PathBuf,
}

/// A loaded vector case: the graph, its leaf bytes and the expected output.
pub struct LoadedVector {
    /// Case name.
    pub name: String,
    /// The op.
    pub op: Op,
    /// Graph ending in the op.
    pub graph: Graph,
    /// The node under test.
    pub out: TensorId,
    /// Leaf bytes.
    pub leaves: Vec<(TensorId, Vec<u8>)>,
    /// Expected output as f32.
    pub expected: Vec<f32>,
    /// NMSE bound.
    pub nmse_max: f64,
}

/// One manifest entry: the loaded case, or its name and why it did not load.
pub type VectorLoad = Result<LoadedVector, (String, String)>;

/// Reads `dir/manifest.json` and builds every case; a case that cannot be
/// built is returned as `Err((name, reason))`.
pub fn load(dir: &Path) -> Result<Vec<VectorLoad>, String> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let manifest: Manifest =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(manifest
        .cases
        .into_iter()
        .map(|c| {
            let name = c.name.clone();
            load_case(dir, c).map_err(|e| (name, e))
        })
        .collect())
}

fn parse_dtype(s: &str) -> Result<DType, String> {
    DType::from_name(s).ok_or_else(|| format!("unknown dtype '{s}'"))
}

fn load_case(dir: &Path, c: VectorCase) -> Result<LoadedVector, String> {
    let op = Op::from_name(&c.op).ok_or_else(|| format!("unknown op '{}'", c.op))?;
    if c.op_params.len() > 16 {
        return Err(format!("{} op_params given; at most 16", c.op_params.len()));
    }
    let mut params = [0i32; 16];
    for (slot, n) in params.iter_mut().zip(&c.op_params) {
        *slot = match n.as_i64() {
            Some(i) => i32::try_from(i).map_err(|_| format!("op param {i} does not fit i32"))?,
            None => (n.as_f64().unwrap_or(0.0) as f32).to_bits() as i32,
        };
    }
    let mut g = Graph::new();
    let mut leaves = Vec::new();
    let mut srcs = Vec::new();
    for (i, input) in c.inputs.iter().enumerate() {
        let Some(tf) = input else {
            srcs.push(None);
            continue;
        };
        let dt = parse_dtype(&tf.dtype)?;
        let bytes = read_tensor_file(&dir.join(&tf.file), dt)?;
        let t = leaf(&mut g, &format!("src{i}"), dt, tf, bytes, &mut leaves)?;
        srcs.push(Some(t));
    }
    let out_dt = parse_dtype(&c.output.dtype)?;
    let out =
        build_op(&mut g, op, &params, &srcs, &c.output.ne, out_dt).map_err(|e| e.to_string())?;
    let want_ne = pad4(&c.output.ne)?;
    if g.ne(out) != want_ne || g.dtype(out) != out_dt {
        return Err(format!(
            "{op} yields {} but the manifest's output is {:?} {out_dt}",
            g.describe(out),
            want_ne
        ));
    }
    g.mark_output(out).map_err(|e| e.to_string())?;
    let out_bytes = read_tensor_file(&dir.join(&c.output.file), out_dt)?;
    let mut out_desc = *g.desc(out);
    out_desc.nb = backplane::TensorDesc::new(out_dt, want_ne).nb;
    if out_bytes.len() as u64 != out_desc.nbytes() {
        return Err(format!(
            "output file has {} bytes, expected {}",
            out_bytes.len(),
            out_desc.nbytes()
        ));
    }
    let expected = backplane::host::read_f32(&out_desc, &out_bytes);
    Ok(LoadedVector {
        name: c.name,
        op,
        graph: g,
        out,
        leaves,
        expected,
        nmse_max: c.nmse_max,
    })
}

fn pad4(ne: &[i64]) -> Result<[i64; 4], String> {
    if ne.is_empty() || ne.len() > 4 {
        return Err(format!("shape {ne:?} must have 1 to 4 dims"));
    }
    let mut out = [1; 4];
    out[..ne.len()].copy_from_slice(ne);
    Ok(out)
}

fn leaf(
    g: &mut Graph,
    name: &str,
    dt: DType,
    tf: &TensorFile,
    bytes: Vec<u8>,
    leaves: &mut Vec<(TensorId, Vec<u8>)>,
) -> Result<TensorId, String> {
    let ne = pad4(&tf.ne)?;
    match &tf.nb {
        None => {
            let t = g.input(name, dt, &ne).map_err(|e| e.to_string())?;
            if bytes.len() as u64 != g.desc(t).nbytes() {
                return Err(format!(
                    "{name}: file has {} bytes, expected {}",
                    bytes.len(),
                    g.desc(t).nbytes()
                ));
            }
            leaves.push((t, bytes));
            Ok(t)
        }
        Some(nb) => {
            if dt.is_quantized() {
                return Err(format!(
                    "{name}: strided quantized inputs are not supported"
                ));
            }
            if nb.len() != 4 && nb.len() != tf.ne.len() {
                return Err(format!("{name}: nb must have as many entries as ne"));
            }
            let ts = dt.type_size();
            if !bytes.len().is_multiple_of(ts) {
                return Err(format!(
                    "{name}: {} bytes is not a whole number of {dt} elements",
                    bytes.len()
                ));
            }
            let storage = g
                .input(name, dt, &[(bytes.len() / ts) as i64])
                .map_err(|e| e.to_string())?;
            leaves.push((storage, bytes));
            let mut nb4 = [0u64; 4];
            nb4[..nb.len()].copy_from_slice(nb);
            for i in nb.len()..4 {
                nb4[i] = nb4[i - 1] * ne[i - 1] as u64;
            }
            if nb4[0] != ts as u64 {
                return Err(format!("{name}: nb[0] must be the element size {ts}"));
            }
            g.view(storage, &ne, &nb4[1..], 0)
                .map_err(|e| e.to_string())
        }
    }
}

/// Reads raw little-endian bytes or a `.npy` file's payload.
pub fn read_tensor_file(path: &Path, dt: DType) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if path.extension().is_some_and(|e| e == "npy") {
        return npy_payload(&bytes, dt).map_err(|e| format!("{}: {e}", path.display()));
    }
    Ok(bytes)
}

fn npy_payload(b: &[u8], dt: DType) -> Result<Vec<u8>, String> {
    if b.len() < 10 || &b[..6] != b"\x93NUMPY" {
        return Err("not a .npy file".into());
    }
    let (hlen, start) = match b[6] {
        1 => (u16::from_le_bytes([b[8], b[9]]) as usize, 10),
        2 | 3 => {
            if b.len() < 12 {
                return Err("truncated .npy header".into());
            }
            (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
        }
        v => return Err(format!(".npy version {v} not supported")),
    };
    let header = std::str::from_utf8(b.get(start..start + hlen).ok_or("truncated .npy header")?)
        .map_err(|_| "bad .npy header")?;
    if header.contains("'fortran_order': True") {
        return Err("Fortran-ordered arrays are not supported".into());
    }
    let want = match dt {
        DType::F32 => "<f4",
        DType::F16 => "<f2",
        DType::I8 => "|i1",
        DType::I16 => "<i2",
        DType::I32 => "<i4",
        DType::I64 => "<i8",
        DType::BF16 | DType::Q4_0 | DType::Q4_1 | DType::Q5_0 | DType::Q5_1 | DType::Q8_0 => "|u1",
        _ => "|u1",
    };
    let ok = header.contains(&format!("'descr': '{want}'"))
        || (want == "|u1" && header.contains("'descr': '|V"));
    if !ok {
        return Err(format!(
            "dtype {dt} needs descr '{want}' (header: {header})"
        ));
    }
    Ok(b[start + hlen..].to_vec())
}

/// Builds `op` from ggml op params through the typed constructors, so the
/// same shape checks apply as everywhere else.
fn build_op(
    g: &mut Graph,
    op: Op,
    p: &[i32; 16],
    srcs: &[Option<TensorId>],
    out_ne: &[i64],
    out_dt: DType,
) -> Result<TensorId, Box<dyn std::error::Error>> {
    let f = |i: usize| f32::from_bits(p[i] as u32);
    let s = |i: usize| -> Result<TensorId, String> {
        srcs.get(i)
            .copied()
            .flatten()
            .ok_or_else(|| format!("{op} needs source {i}"))
    };
    let opt = |i: usize| srcs.get(i).copied().flatten();
    let conv = Conv2dParams {
        s0: p[0],
        s1: p[1],
        p0: p[2],
        p1: p[3],
        d0: p[4],
        d1: p[5],
    };
    Ok(match op {
        Op::Add => g.add(s(0)?, s(1)?)?,
        Op::Sub => g.sub(s(0)?, s(1)?)?,
        Op::Mul => g.mul(s(0)?, s(1)?)?,
        Op::Div => g.div(s(0)?, s(1)?)?,
        Op::Sqr => g.sqr(s(0)?)?,
        Op::Sqrt => g.sqrt(s(0)?)?,
        Op::Log => g.log(s(0)?)?,
        Op::Sin => g.sin(s(0)?)?,
        Op::Cos => g.cos(s(0)?)?,
        Op::Sum => g.sum(s(0)?)?,
        Op::SumRows => g.sum_rows(s(0)?)?,
        Op::Cumsum => g.cumsum(s(0)?)?,
        Op::Argmax => g.argmax(s(0)?)?,
        Op::Repeat => {
            let shape = g.input("repeat_shape", out_dt, out_ne)?;
            g.repeat(s(0)?, shape)?
        }
        Op::Concat => g.concat(s(0)?, s(1)?, p[0] as usize)?,
        Op::Norm => g.norm(s(0)?, f(0))?,
        Op::RmsNorm => g.rms_norm(s(0)?, f(0))?,
        Op::L2Norm => g.l2_norm(s(0)?, f(0))?,
        Op::MulMat => g.mul_mat(s(0)?, s(1)?)?,
        Op::MulMatId => g.mul_mat_id(s(0)?, s(1)?, s(2)?)?,
        Op::Scale => g.scale_bias(s(0)?, f(0), f(1), false)?,
        Op::SetRows => {
            let dst = g.input("set_rows_dst", out_dt, out_ne)?;
            g.set_rows(dst, s(0)?, s(1)?)?
        }
        Op::Cpy => g.cpy(s(0)?, s(1)?)?,
        Op::Cont => g.cont(s(0)?)?,
        Op::GetRows => g.get_rows(s(0)?, s(1)?)?,
        Op::SoftMax => g.soft_max(s(0)?, opt(1), opt(2), f(0), f(1))?,
        Op::Rope => {
            let mut rp = RopeParams::new(p[1], p[2]);
            rp.n_ctx_orig = p[4];
            [
                rp.freq_base,
                rp.freq_scale,
                rp.ext_factor,
                rp.attn_factor,
                rp.beta_fast,
                rp.beta_slow,
            ] = [f(5), f(6), f(7), f(8), f(9), f(10)];
            rp.sections.copy_from_slice(&p[11..15]);
            g.rope(s(0)?, s(1)?, opt(2), rp)?
        }
        Op::Clamp => g.clamp(s(0)?, f(0), f(1))?,
        Op::Conv2d => g.conv_2d(s(0)?, s(1)?, conv)?,
        Op::Im2col => g.im2col(s(0)?, s(1)?, conv, p[6] != 0, out_dt)?,
        Op::Pad => g.pad(s(0)?, p[..8].try_into().expect("8 params"))?,
        Op::Argsort => g.argsort(
            s(0)?,
            if p[0] == 1 {
                SortOrder::Desc
            } else {
                SortOrder::Asc
            },
        )?,
        Op::TopK => g.top_k(s(0)?, out_ne.first().copied().unwrap_or(1))?,
        Op::FlashAttnExt => {
            g.flash_attn_ext(s(0)?, s(1)?, s(2)?, opt(3), opt(4), f(0), f(1), f(2))?
        }
        Op::SsmConv => g.ssm_conv(s(0)?, s(1)?)?,
        Op::SsmScan => g.ssm_scan(s(0)?, s(1)?, s(2)?, s(3)?, s(4)?, s(5)?, s(6)?)?,
        Op::Unary => {
            let u = UnaryOp::from_code(p[0] as u32)?;
            if u == UnaryOp::Xielu {
                g.xielu(s(0)?, f(1), f(2), f(3), f(4))?
            } else {
                g.unary(s(0)?, u)?
            }
        }
        Op::Glu => {
            let gl = GluOp::from_code(p[0] as u32)?;
            match (gl, opt(1)) {
                (GluOp::SwigluOai, b) => g.swiglu_oai(s(0)?, b, f(2), f(3))?,
                (_, Some(b)) => g.glu(s(0)?, b, gl)?,
                (_, None) => g.glu_split(s(0)?, gl, p[1] != 0)?,
            }
        }
        Op::Fill => g.fill(s(0)?, f(0))?,
        Op::None | Op::Reshape | Op::View | Op::Permute | Op::Transpose => {
            return Err(format!(
                "{op} is not a computing op; give strides with the inputs' nb instead"
            )
            .into());
        }
    })
}

//! The tensors an architecture needs, checked against the file: names,
//! shapes, types and byte sizes.

use backplane::DType;

use crate::error::LlmError;
use crate::hparams::HParams;
use crate::source::ModelSource;

/// Which part of the model a weight belongs to (decides its device).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The token embedding (on the CPU, as llama.cpp keeps it; a graph
    /// may read a tied copy on the output's device instead: [`EndLeaves`]).
    Input,
    /// A transformer block.
    Layer(usize),
    /// The output norm and projection.
    Output,
}

/// The leaves a forward graph reads its embedding rows and its output
/// projection from (see `Model`'s loading for how they are chosen).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndLeaves {
    /// GET_ROWS picks the tokens' rows from this leaf.
    pub embed: String,
    /// The output projection's weight.
    pub output: String,
}

impl EndLeaves {
    /// Untied: each its own tensor.
    pub fn untied() -> EndLeaves {
        EndLeaves {
            embed: "token_embd.weight".into(),
            output: "output.weight".into(),
        }
    }

    /// Tied: both read the leaf `name`.
    pub fn both(name: &str) -> EndLeaves {
        EndLeaves {
            embed: name.into(),
            output: name.into(),
        }
    }

    /// Whether the weight `name` is read by the graph (an untied name the
    /// graph does not use is neither placed nor uploaded).
    pub fn reads(&self, name: &str) -> bool {
        match name {
            "token_embd.weight" | "output.weight" => self.embed == name || self.output == name,
            _ => true,
        }
    }
}

/// One weight of the model as the graph declares it.
#[derive(Clone, Debug, PartialEq)]
pub struct WeightSpec {
    /// Name in the graph (the GGUF name, except a tied output).
    pub name: String,
    /// Name of the GGUF tensor holding its bytes.
    pub file_name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub ne: [i64; 4],
    /// Where it belongs.
    pub role: Role,
}

/// The model's weights, checked.
#[derive(Clone, Debug)]
pub struct Weights {
    /// Every weight, in load order.
    pub specs: Vec<WeightSpec>,
    /// `rope_freqs.weight` is present (Llama 3.1 style frequency factors).
    pub rope_freqs: bool,
    /// No `output.weight`: the output projection reads `token_embd.weight`.
    pub tied_output: bool,
}

impl Weights {
    /// The spec named `name`.
    pub fn get(&self, name: &str) -> Option<&WeightSpec> {
        self.specs.iter().find(|s| s.name == name)
    }

    /// Lists and checks every tensor `hp.arch` needs from `src`.
    pub fn check(src: &dyn ModelSource, hp: &HParams) -> Result<Weights, LlmError> {
        let mut specs = Vec::new();
        let e = hp.n_embd as i64;
        let q_width = (hp.n_head * hp.head_dim) as i64;
        let k_width = hp.n_embd_k_gqa() as i64;
        let v_width = hp.n_embd_v_gqa() as i64;
        let o_width = (hp.n_head * hp.head_dim_v) as i64;
        let vocab = hp.n_vocab as i64;
        let mut add = |name: String, ne: &[i64], kind: Kind, role: Role| -> Result<(), LlmError> {
            let spec = checked(src, &name, ne, kind, role)?;
            specs.push(spec);
            Ok(())
        };
        add(
            "token_embd.weight".into(),
            &[e, vocab],
            Kind::Matrix,
            Role::Input,
        )?;
        for l in 0..hp.n_layer {
            let p = |s: &str| format!("blk.{l}.{s}");
            let r = Role::Layer(l);
            add(p("attn_norm.weight"), &[e], Kind::F32, r)?;
            add(p("attn_q.weight"), &[e, q_width], Kind::Matrix, r)?;
            add(p("attn_k.weight"), &[e, k_width], Kind::Matrix, r)?;
            add(p("attn_v.weight"), &[e, v_width], Kind::Matrix, r)?;
            if hp.arch.has_qkv_bias() {
                add(p("attn_q.bias"), &[q_width], Kind::F32, r)?;
                add(p("attn_k.bias"), &[k_width], Kind::F32, r)?;
                add(p("attn_v.bias"), &[v_width], Kind::F32, r)?;
            }
            if hp.arch.has_qk_norm() {
                add(p("attn_q_norm.weight"), &[hp.head_dim as i64], Kind::F32, r)?;
                add(p("attn_k_norm.weight"), &[hp.head_dim as i64], Kind::F32, r)?;
            }
            add(p("attn_output.weight"), &[o_width, e], Kind::Matrix, r)?;
            add(p("ffn_norm.weight"), &[e], Kind::F32, r)?;
            add(p("ffn_gate.weight"), &[e, hp.n_ff as i64], Kind::Matrix, r)?;
            add(p("ffn_up.weight"), &[e, hp.n_ff as i64], Kind::Matrix, r)?;
            add(p("ffn_down.weight"), &[hp.n_ff as i64, e], Kind::Matrix, r)?;
        }
        add("output_norm.weight".into(), &[e], Kind::F32, Role::Output)?;
        let tied_output = src.tensor("output.weight").is_none();
        if !tied_output {
            add(
                "output.weight".into(),
                &[e, vocab],
                Kind::Matrix,
                Role::Output,
            )?;
        }
        let rope_freqs = src.tensor("rope_freqs.weight").is_some();
        if rope_freqs {
            let n = (hp.rope_dims / 2) as i64;
            add("rope_freqs.weight".into(), &[n], Kind::F32, Role::Output)?;
        }
        if tied_output {
            let mut spec = specs[0].clone();
            spec.name = "output.weight".into();
            spec.role = Role::Output;
            specs.push(spec);
        }
        Ok(Weights {
            specs,
            rope_freqs,
            tied_output,
        })
    }
}

/// What types a tensor may have.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// A mat-mul weight or embedding: any weight type.
    Matrix,
    /// A norm weight or bias.
    F32,
}

fn checked(
    src: &dyn ModelSource,
    name: &str,
    ne: &[i64],
    kind: Kind,
    role: Role,
) -> Result<WeightSpec, LlmError> {
    let path = src.path().to_path_buf();
    let t = src.tensor(name).ok_or_else(|| LlmError::MissingTensor {
        path: path.clone(),
        name: name.into(),
    })?;
    let mut want = [1i64; 4];
    want[..ne.len()].copy_from_slice(ne);
    let bad = |expected: String, found: String| LlmError::BadTensor {
        path: path.clone(),
        name: name.into(),
        expected,
        found,
    };
    if t.ne != want {
        return Err(bad(format!("shape {ne:?}"), format!("shape {:?}", t.ne)));
    }
    let type_ok = match kind {
        Kind::Matrix => DType::WEIGHT_TYPES.contains(&t.dtype),
        Kind::F32 => t.dtype == DType::F32,
    };
    if !type_ok {
        let expected = match kind {
            Kind::Matrix => "a weight type (f32, f16, bf16 or a block format)".to_string(),
            Kind::F32 => "type f32".to_string(),
        };
        return Err(bad(expected, format!("type {}", t.dtype)));
    }
    let rows = (t.ne[1] * t.ne[2] * t.ne[3]) as usize;
    let size = t
        .dtype
        .row_size(t.ne[0] as usize)
        .map(|r| r * rows)
        .ok_or_else(|| {
            bad(
                format!("ne0 a multiple of {}'s block size", t.dtype),
                format!("ne0 = {}", t.ne[0]),
            )
        })?;
    if t.data.len() != size {
        return Err(bad(
            format!("{size} bytes of data"),
            format!("{} bytes", t.data.len()),
        ));
    }
    Ok(WeightSpec {
        name: name.into(),
        file_name: name.into(),
        dtype: t.dtype,
        ne: want,
        role,
    })
}

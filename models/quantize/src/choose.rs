//! The per-tensor type choice: which tensors are quantized at all, what
//! each mix gives each tensor, and the fallbacks for rows that do not split
//! into whole blocks — the rules of llama.cpp's `llama-quant.cpp`.

use backplane_abi::DType;
use backplane_gguf::{Gguf, TensorInfo};

use crate::{FileType, QuantizeError, QuantizeParams};

/// What the type choice needs to know about the model (from its metadata).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelInfo {
    /// `general.architecture` (`"llama"`, `"qwen2"`, ...; empty when absent).
    pub arch: String,
    /// `{arch}.block_count`: the layer count the `_M` mixes spread bits over.
    pub n_layer: u32,
    /// `{arch}.attention.head_count` (of the first layer when per layer).
    pub n_head: u32,
    /// `{arch}.attention.head_count_kv` (defaults to `n_head`).
    pub n_head_kv: u32,
    /// `{arch}.expert_count` (0 for dense models).
    pub n_expert: u32,
}

impl ModelInfo {
    /// Reads the fields from a model's metadata. A missing `block_count`
    /// falls back to one past the highest `blk.N.` in the tensor names
    /// (llama.cpp refuses such files; this crate quantizes them).
    pub fn from_gguf(model: &Gguf) -> ModelInfo {
        let arch = model
            .get("general.architecture")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string();
        let first_u32 = |key: &str| -> Option<u32> {
            match model.get(&format!("{arch}.{key}"))? {
                backplane_gguf::Value::Array(array) => first_of_array(array),
                value => value.as_u64().and_then(|v| u32::try_from(v).ok()),
            }
        };
        let n_layer = first_u32("block_count").unwrap_or_else(|| {
            model
                .tensors()
                .iter()
                .filter_map(|t| block_index(&t.name))
                .filter(|&i| i >= 0)
                .max()
                .map_or(0, |i| u32::try_from(i + 1).unwrap_or(u32::MAX))
        });
        let n_head = first_u32("attention.head_count").unwrap_or(0);
        ModelInfo {
            n_layer,
            n_head,
            n_head_kv: first_u32("attention.head_count_kv").unwrap_or(n_head),
            n_expert: first_u32("expert_count").unwrap_or(0),
            arch,
        }
    }

    /// Query heads per K/V head (llama.cpp's `n_gqa`; 0 when there are no
    /// K/V heads).
    pub fn n_gqa(&self) -> u32 {
        self.n_head.checked_div(self.n_head_kv).unwrap_or(0)
    }

    /// Whether llama.cpp classifies the model as a 70B one, whose attn_v
    /// gets q5_K instead of q3_K/q4_K.
    pub fn is_70b(&self) -> bool {
        match self.arch.as_str() {
            "llama" => self.n_expert != 8 && self.n_layer == 80 && self.n_head != self.n_head_kv,
            "qwen2" | "deci" | "olmo" => self.n_layer == 80,
            "jais2" => self.n_layer == 68,
            _ => false,
        }
    }

    fn is_falcon(&self) -> bool {
        self.arch == "falcon"
    }
}

/// The first element of an integer array (per-layer hyperparameters).
fn first_of_array(array: &backplane_gguf::Array) -> Option<u32> {
    use backplane_gguf::Array;
    let first: i64 = match array {
        Array::U8(v) => (*v.first()?).into(),
        Array::I8(v) => (*v.first()?).into(),
        Array::U16(v) => (*v.first()?).into(),
        Array::I16(v) => (*v.first()?).into(),
        Array::U32(v) => (*v.first()?).into(),
        Array::I32(v) => (*v.first()?).into(),
        Array::U64(v) => i64::try_from(*v.first()?).ok()?,
        Array::I64(v) => *v.first()?,
        _ => return None,
    };
    u32::try_from(first).ok()
}

/// The layer number of a `blk.N.` tensor name, read as C's
/// `sscanf(name, "blk.%d.")` reads it (optional sign, digits).
pub(crate) fn block_index(name: &str) -> Option<i64> {
    let rest = name.strip_prefix("blk.")?;
    let rest = rest.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (negative, digits) = match rest.as_bytes().first()? {
        b'-' => (true, &rest[1..]),
        b'+' => (false, &rest[1..]),
        _ => (false, rest),
    };
    let end = digits
        .bytes()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(digits.len());
    let value: i64 = digits[..end].parse().ok()?;
    let value = if negative { -value } else { value };
    Some(i64::from(i32::try_from(value).ok()?))
}

/// The order llama.cpp writes tensors in: tensors outside `blk.N.` first,
/// then by layer number, and by name (bytewise) within each.
pub fn llama_order(tensors: &[TensorInfo]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by(|&a, &b| {
        let (a, b) = (&tensors[a].name, &tensors[b].name);
        let layer = |name: &str| block_index(name).unwrap_or(-1);
        layer(a)
            .cmp(&layer(b))
            .then_with(|| a.as_bytes().cmp(b.as_bytes()))
    });
    order
}

/// The broad role of a tensor, from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    /// `token_embd.weight` or `per_layer_token_embd.weight`.
    TokenEmbd,
    /// `*attn_q.weight`.
    AttentionQ,
    /// `*attn_v.weight`.
    AttentionV,
    /// `*attn_k.weight`.
    AttentionK,
    /// `*attn_qkv.weight` (fused Q/K/V).
    AttentionQkv,
    /// `*attn_kv_b.weight` (MLA).
    AttentionKvB,
    /// `*attn_output.weight`.
    AttentionOutput,
    /// Names containing `ffn_up`.
    FfnUp,
    /// Names containing `ffn_gate`.
    FfnGate,
    /// Names containing `ffn_down`.
    FfnDown,
    /// `output.weight`.
    Output,
    /// Everything else.
    Other,
}

impl Category {
    /// The category of a tensor name, tested in llama.cpp's order.
    pub fn of(name: &str) -> Category {
        if name == "output.weight" {
            return Category::Output;
        }
        if name == "token_embd.weight" || name == "per_layer_token_embd.weight" {
            return Category::TokenEmbd;
        }
        const BY_SUBSTRING: [(&str, Category); 9] = [
            ("attn_qkv.weight", Category::AttentionQkv),
            ("attn_kv_b.weight", Category::AttentionKvB),
            ("attn_v.weight", Category::AttentionV),
            ("attn_k.weight", Category::AttentionK),
            ("attn_q.weight", Category::AttentionQ),
            ("attn_output.weight", Category::AttentionOutput),
            ("ffn_up", Category::FfnUp),
            ("ffn_gate", Category::FfnGate),
            ("ffn_down", Category::FfnDown),
        ];
        BY_SUBSTRING
            .iter()
            .find(|(part, _)| name.contains(part))
            .map_or(Category::Other, |(_, c)| *c)
    }

    /// The value tensors that the mixes treat as most sensitive.
    fn is_attention_v_like(self) -> bool {
        matches!(
            self,
            Category::AttentionV | Category::AttentionQkv | Category::AttentionKvB
        )
    }
}

/// Number of dimensions ignoring trailing ones (ggml's `ggml_n_dims`).
fn n_dims(ne: &[i64; 4]) -> usize {
    (1..4).rev().find(|&i| ne[i] > 1).map_or(1, |i| i + 1)
}

/// Name parts of tensors that llama.cpp never quantizes (small tables,
/// gates, positional and multimodal tensors).
const NEVER_QUANTIZED_PARTS: [&str; 35] = [
    "_norm.weight",
    "ffn_gate_inp.weight",
    "ffn_gate_tid2eid.weight",
    "altup",
    "laurel",
    "per_layer_model_proj",
    "ssm_conv1d",
    "shortconv.conv.weight",
    "indexer.k_proj.weight",
    "indexer.q_proj.weight",
    "time_mix_first.weight",
    "time_mix_w0.weight",
    "time_mix_w1.weight",
    "time_mix_w2.weight",
    "time_mix_v0.weight",
    "time_mix_v1.weight",
    "time_mix_v2.weight",
    "time_mix_a0.weight",
    "time_mix_a1.weight",
    "time_mix_a2.weight",
    "time_mix_g1.weight",
    "time_mix_g2.weight",
    "time_mix_decay_w1.weight",
    "time_mix_decay_w2.weight",
    "time_mix_lerp_fused.weight",
    "attn_rel_b.weight",
    ".position_embd",
    "sam.pos_embd",
    "sam.neck.",
    "sam.net_",
    ".rel_pos",
    ".patch_embd",
    ".patch_merger",
    "a.rvq.codebook",
    "mm.a.code_embd",
];

/// Name parts llama.cpp keeps unquantized in `glm5-next` models only.
const GLM5_NEXT_KEPT_PARTS: [&str; 14] = [
    "hc_",
    "indexer.attn_q_b",
    "indexer.attn_k",
    "indexer.proj",
    "indexer_compressor_gate",
    "indexer_compressor_ape",
    "ssm_f_a.weight",
    "ssm_f_b.weight",
    "ssm_g_a.weight",
    "ssm_g_b.weight",
    "ssm_beta.weight",
    "attn_kv_a_mqa.weight",
    "attn_k_b.weight",
    "attn_v_b.weight",
];

/// Whether llama.cpp would quantize the tensor at all: weights of 2 or more
/// dimensions named `*weight`, except norms, position embeddings, token
/// types, expert gates and a list of small tables; `output.weight` only when
/// `quantize_output`.
pub fn allows_quantization(arch: &str, name: &str, ne: &[i64; 4], quantize_output: bool) -> bool {
    if n_dims(ne) < 2 || !name.ends_with("weight") {
        return false;
    }
    if !quantize_output && name == "output.weight" {
        return false;
    }
    if name == "position_embd.weight" || name == "token_types.weight" {
        return false;
    }
    let kept = NEVER_QUANTIZED_PARTS.iter().any(|part| name.contains(part));
    let kept_glm = arch == "glm5-next" && GLM5_NEXT_KEPT_PARTS.iter().any(|p| name.contains(p));
    !(kept || kept_glm)
}

/// llama.cpp's rule for which layers of an `_M` mix get more bits: the
/// first and last eighth, and every third layer between.
fn use_more_bits(i_layer: i64, n_layer: i64) -> bool {
    i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2
}

/// One tensor's decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorPlan {
    /// Index into the input's tensor table.
    pub index: usize,
    /// The tensor's name.
    pub name: String,
    /// Its type in the input.
    pub from: DType,
    /// Its type in the output (equal to `from` when it is copied).
    pub to: DType,
    /// True when its rows do not split into the chosen type's blocks and a
    /// fallback type was taken instead.
    pub fell_back: bool,
}

/// The state of the choice across tensors (llama.cpp's counters).
struct Chooser<'a> {
    model: &'a ModelInfo,
    params: &'a QuantizeParams,
    tied_embeddings: bool,
    n_attention_wv: i64,
    i_attention_wv: i64,
    i_ffn_down: i64,
    i_ffn_gate: i64,
    i_ffn_up: i64,
}

impl Chooser<'_> {
    /// The layer of an FFN tensor: the running count for dense models, the
    /// `blk.N.` number for mixture-of-experts models.
    fn layer_of(&self, counter: i64, name: &str) -> Result<(i64, i64), QuantizeError> {
        let n_layer = i64::from(self.model.n_layer);
        if self.model.n_expert <= 1 {
            return Ok((counter, n_layer));
        }
        let layer = block_index(name).ok_or_else(|| QuantizeError::Model {
            reason: format!("cannot read the layer of expert tensor '{name}' (no blk.N. prefix)"),
        })?;
        if layer < 0 || layer >= n_layer {
            return Err(QuantizeError::Model {
                reason: format!("tensor '{name}' names layer {layer}, outside 0..{n_layer}"),
            });
        }
        Ok((layer, n_layer))
    }

    /// The mix's type for a tensor (llama.cpp's `llama_tensor_get_type_impl`
    /// for the file types this crate supports).
    fn mix_type(&mut self, name: &str, ne0: i64, default: DType) -> Result<DType, QuantizeError> {
        use FileType as F;
        let ftype = self.params.ftype;
        let model = self.model;
        let category = Category::of(name);
        let mut new_type = default;
        if category == Category::Output || (self.tied_embeddings && category == Category::TokenEmbd)
        {
            let block = i64::try_from(new_type.block_size()).unwrap_or(1);
            if model.is_falcon() || ne0 % block != 0 {
                new_type = DType::Q8_0;
            } else if new_type != DType::Q8_0 {
                new_type = DType::Q6_K;
            }
        } else if category == Category::TokenEmbd {
            // Only the IQ and ternary mixes change an untied token_embd.
        } else if category.is_attention_v_like() {
            let (i, n) = (self.i_attention_wv, self.n_attention_wv);
            match ftype {
                F::Q2_K => {
                    new_type = if model.n_gqa() >= 4 {
                        DType::Q4_K
                    } else {
                        DType::Q3_K
                    }
                }
                F::Q3_K_M => new_type = if i < 2 { DType::Q5_K } else { DType::Q4_K },
                F::Q3_K_L => new_type = DType::Q5_K,
                F::Q4_K_M | F::Q5_K_M if use_more_bits(i, n) => new_type = DType::Q6_K,
                F::Q4_K_S if i < 4 => new_type = DType::Q5_K,
                _ => {}
            }
            if model.is_70b() && matches!(new_type, DType::Q3_K | DType::Q4_K) {
                new_type = DType::Q5_K;
            }
            if model.n_expert == 8 {
                new_type = DType::Q8_0;
            }
            self.i_attention_wv += 1;
        } else if category == Category::AttentionK {
            if model.n_expert == 8 {
                new_type = DType::Q8_0;
            }
        } else if category == Category::AttentionQ {
            // Only the IQ3 mixes change attn_q.
        } else if category == Category::FfnDown {
            let (i, n) = self.layer_of(self.i_ffn_down, name)?;
            let falcon = model.is_falcon();
            match ftype {
                F::Q2_K => new_type = DType::Q3_K,
                F::Q3_K_M => {
                    new_type = if i < n / 16 {
                        DType::Q5_K
                    } else if !falcon || use_more_bits(i, n) {
                        DType::Q4_K
                    } else {
                        DType::Q3_K
                    }
                }
                F::Q3_K_L => new_type = if falcon { DType::Q4_K } else { DType::Q5_K },
                F::Q4_K_M if falcon => {
                    new_type = if i < n / 16 {
                        DType::Q6_K
                    } else if use_more_bits(i, n) {
                        DType::Q5_K
                    } else {
                        DType::Q4_K
                    }
                }
                F::Q4_K_M | F::Q5_K_M if use_more_bits(i, n) => new_type = DType::Q6_K,
                F::Q4_K_S if !falcon && i < n / 8 => new_type = DType::Q5_K,
                _ => {}
            }
            self.i_ffn_down += 1;
        } else if category == Category::AttentionOutput {
            if !model.is_falcon() {
                if model.n_expert == 8 {
                    if matches!(
                        ftype,
                        F::Q2_K | F::Q3_K_S | F::Q3_K_M | F::Q4_K_S | F::Q4_K_M
                    ) {
                        new_type = DType::Q5_K;
                    }
                } else {
                    match ftype {
                        F::Q2_K => new_type = DType::Q3_K,
                        F::Q3_K_M => new_type = DType::Q4_K,
                        F::Q3_K_L => new_type = DType::Q5_K,
                        _ => {}
                    }
                }
            } else if ftype == F::Q3_K_L {
                new_type = DType::Q4_K;
            }
        } else if category == Category::FfnGate {
            // Only IQ3_XS changes ffn_gate, but the layer is still checked.
            self.layer_of(self.i_ffn_gate, name)?;
            self.i_ffn_gate += 1;
        } else if category == Category::FfnUp {
            self.layer_of(self.i_ffn_up, name)?;
            self.i_ffn_up += 1;
        }
        Ok(new_type)
    }
}

/// The type llama.cpp falls back to when a row of `ne0` values does not
/// split into `target`'s blocks: a 32-block type of similar size, or f16
/// when even that does not fit. `None` when no fallback is needed.
pub fn fallback_type(target: DType, ne0: i64) -> Option<DType> {
    let fits = |t: DType| i64::try_from(t.block_size()).is_ok_and(|b| ne0 % b == 0);
    if fits(target) {
        return None;
    }
    let smaller = match target {
        DType::Q2_K | DType::Q3_K => DType::Q4_0,
        DType::Q4_K => DType::Q5_0,
        DType::Q5_K => DType::Q5_1,
        DType::Q6_K => DType::Q8_0,
        other => other,
    };
    Some(if fits(smaller) { smaller } else { DType::F16 })
}

/// Chooses every tensor's output type, in llama.cpp's order (the order of
/// the returned list, which is the order the output file has).
///
/// The choice depends on the tensors before it (the `_M` mixes count attn_v
/// and ffn_down tensors), so it is made for the whole model at once.
pub fn plan(
    model: &ModelInfo,
    tensors: &[TensorInfo],
    params: &QuantizeParams,
) -> Result<Vec<TensorPlan>, QuantizeError> {
    let order = llama_order(tensors);
    let mut chooser = Chooser {
        model,
        params,
        tied_embeddings: !tensors.iter().any(|t| t.name == "output.weight"),
        n_attention_wv: tensors
            .iter()
            .filter(|t| Category::of(&t.name).is_attention_v_like())
            .count()
            .try_into()
            .unwrap_or(i64::MAX),
        i_attention_wv: 0,
        i_ffn_down: 0,
        i_ffn_gate: 0,
        i_ffn_up: 0,
    };
    let default = params.ftype.default_type();
    let mut plans = Vec::with_capacity(tensors.len());
    for index in order {
        let t = &tensors[index];
        let mut to = t.dtype;
        let mut fell_back = false;
        if allows_quantization(&model.arch, &t.name, &t.ne, params.quantize_output) {
            to = default;
            if default.is_quantized() {
                if !params.pure {
                    to = chooser.mix_type(&t.name, t.ne[0], default)?;
                }
                if let Some(fallback) = fallback_type(to, t.ne[0]) {
                    to = fallback;
                    fell_back = true;
                }
            }
        }
        plans.push(TensorPlan {
            index,
            name: t.name.clone(),
            from: t.dtype,
            to,
            fell_back,
        });
    }
    Ok(plans)
}

/// The output type of the tensor `name` (see [`plan`]); `None` when the
/// model has no such tensor.
pub fn tensor_type(
    model: &ModelInfo,
    tensors: &[TensorInfo],
    params: &QuantizeParams,
    name: &str,
) -> Result<Option<DType>, QuantizeError> {
    Ok(plan(model, tensors, params)?
        .into_iter()
        .find(|p| p.name == name)
        .map(|p| p.to))
}

//! The tensors of a model: names, shapes and how their values are drawn.

use crate::shape::Shape;
use crate::weights::Init;

/// Target standard deviation of the logits: wide enough that greedy
/// decoding has clear winners, narrow enough that the softmax is not
/// one-hot.
pub const LOGIT_STD: f32 = 5.0;

/// Gain of the attention branch (`attn_output`) over `1 / sqrt(2 n_layer)`.
pub const ATTN_BRANCH_GAIN: f32 = 2.0;

/// Gain of the feed-forward branch (`ffn_down`) over `1 / sqrt(2 n_layer)`.
///
/// The two gains make the layers' sum large (RMS about 4 to 5) next to the
/// input embedding: with tied embeddings a token's own logit is its
/// embedding's squared norm (`LOGIT_STD^2`) over the final state's RMS, and
/// with a final state near unit RMS every token would predict itself. The
/// token-wise feed-forward branch outweighs attention, which mixes positions:
/// with attention dominant, consecutive positions of a deep random model
/// converge to nearly the same state and greedy decoding repeats a token.
pub const FFN_BRANCH_GAIN: f32 = 6.0;

/// Standard deviation of the attention scores `q·k / sqrt(head_dim)` for a
/// normalised input: sharp enough that each query singles out a few keys.
/// With scores near unit spread attention averages over the whole context,
/// consecutive positions see nearly the same state, and a model with tied
/// embeddings repeats its last token.
pub const ATTN_SCORE_STD: f32 = 3.0;

/// Standard deviation of the noise around 1 in every norm weight.
pub const NORM_NOISE_STD: f32 = 0.05;

/// Standard deviation of the Q/K/V biases (Qwen2).
pub const BIAS_STD: f32 = 0.05;

/// One tensor of a model.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorPlan {
    /// llama.cpp's tensor name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Dimensions in ggml order: `dims[0]` is the row length (a weight's
    /// input width), `dims[1]` the number of rows.
    pub dims: Vec<usize>,
    /// How its values are drawn.
    pub init: Init,
}

impl TensorPlan {
    fn new(name: String, dims: &[usize], init: Init) -> TensorPlan {
        TensorPlan {
            name,
            dims: dims.to_vec(),
            init,
        }
    }

    /// Number of elements.
    pub fn elements(&self) -> usize {
        self.dims.iter().product()
    }

    /// Row length (`dims[0]`).
    pub fn row_len(&self) -> usize {
        self.dims[0]
    }

    /// Number of rows (product of the dimensions after the first).
    pub fn rows(&self) -> usize {
        self.dims[1..].iter().product()
    }

    /// True for 2-D weights, false for 1-D norms and biases (which stay f32
    /// in every file type).
    pub fn is_matrix(&self) -> bool {
        self.dims.len() >= 2
    }
}

/// `1 / sqrt(n)` as f32 (correctly rounded on every platform: sqrt and
/// division are exact IEEE operations).
fn inv_sqrt(n: usize) -> f32 {
    1.0 / (n as f32).sqrt()
}

/// Every tensor of a model of `shape`, in file order: the embeddings, each
/// block, then the output norm and output layer.
///
/// Scales (standard deviations; every matrix draws uniform values):
/// * `token_embd`: 1 when the output layer is separate, so embeddings have
///   unit RMS; `LOGIT_STD / sqrt(n_embd)` when it doubles as the output
///   layer.
/// * `output`: `LOGIT_STD / sqrt(n_embd)`, so logits of a unit-RMS
///   normalised state have a standard deviation near `LOGIT_STD`.
/// * `attn_v`, `ffn_gate/up`: `1 / sqrt(fan_in)`, so their outputs have
///   unit RMS for a normalised input.
/// * `attn_q/k`: `sqrt(ATTN_SCORE_STD) / sqrt(fan_in)`, so attention scores
///   spread by about `ATTN_SCORE_STD`; Qwen3's `attn_q_norm`/`attn_k_norm`
///   weights are `sqrt(ATTN_SCORE_STD) ± NORM_NOISE_STD` for the same effect.
/// * `attn_output`, `ffn_down`: `ATTN_BRANCH_GAIN` (2) and
///   `FFN_BRANCH_GAIN` (6) times `1 / sqrt(fan_in) / sqrt(2 n_layer)`, so
///   the `2 n_layer` residual additions together have an RMS of about 4-5.
/// * norm weights: `1 ± NORM_NOISE_STD`; Q/K/V biases: `BIAS_STD` around 0.
pub fn plan(shape: &Shape) -> Vec<TensorPlan> {
    let d = shape.n_embd;
    let residual_scale = inv_sqrt(2 * shape.n_layer);
    let projection = Init::uniform(inv_sqrt(d));
    // Q and K entries of RMS sqrt(ATTN_SCORE_STD) give scores of that spread.
    let qk_gain = ATTN_SCORE_STD.sqrt();
    let query_key = Init::uniform(qk_gain * inv_sqrt(d));
    let norm = Init::around_one(NORM_NOISE_STD);
    let output_std = LOGIT_STD * inv_sqrt(d);
    let embd_std = if shape.tied_embeddings {
        output_std
    } else {
        1.0
    };

    let mut tensors = vec![TensorPlan::new(
        "token_embd.weight".into(),
        &[d, shape.n_vocab],
        Init::uniform(embd_std),
    )];
    for layer in 0..shape.n_layer {
        let name = |part: &str| format!("blk.{layer}.{part}");
        tensors.push(TensorPlan::new(name("attn_norm.weight"), &[d], norm));
        let projections = [
            ("attn_q", shape.q_dim()),
            ("attn_k", shape.kv_dim()),
            ("attn_v", shape.kv_dim()),
        ];
        for (part, out) in projections {
            let init = if part == "attn_v" {
                projection
            } else {
                query_key
            };
            tensors.push(TensorPlan::new(
                name(&format!("{part}.weight")),
                &[d, out],
                init,
            ));
            if shape.qkv_bias {
                tensors.push(TensorPlan::new(
                    name(&format!("{part}.bias")),
                    &[out],
                    Init::uniform(BIAS_STD),
                ));
            }
        }
        if shape.qk_norm {
            let h = shape.head_dim;
            // The per-head norms undo the projections' gain: their weights
            // carry it instead.
            let qk_norm = Init::around(qk_gain, NORM_NOISE_STD);
            tensors.push(TensorPlan::new(name("attn_q_norm.weight"), &[h], qk_norm));
            tensors.push(TensorPlan::new(name("attn_k_norm.weight"), &[h], qk_norm));
        }
        tensors.push(TensorPlan::new(
            name("attn_output.weight"),
            &[shape.q_dim(), d],
            Init::uniform(ATTN_BRANCH_GAIN * inv_sqrt(shape.q_dim()) * residual_scale),
        ));
        tensors.push(TensorPlan::new(name("ffn_norm.weight"), &[d], norm));
        tensors.push(TensorPlan::new(
            name("ffn_gate.weight"),
            &[d, shape.n_ff],
            projection,
        ));
        tensors.push(TensorPlan::new(
            name("ffn_up.weight"),
            &[d, shape.n_ff],
            projection,
        ));
        tensors.push(TensorPlan::new(
            name("ffn_down.weight"),
            &[shape.n_ff, d],
            Init::uniform(FFN_BRANCH_GAIN * inv_sqrt(shape.n_ff) * residual_scale),
        ));
    }
    tensors.push(TensorPlan::new("output_norm.weight".into(), &[d], norm));
    if !shape.tied_embeddings {
        tensors.push(TensorPlan::new(
            "output.weight".into(),
            &[d, shape.n_vocab],
            Init::uniform(output_std),
        ));
    }
    tensors
}

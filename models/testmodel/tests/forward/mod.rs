//! A plain f32 forward pass of one token at position 0, enough to check the
//! weight scales: with a single token, attention returns each head's value
//! vector unchanged (RoPE at position 0 is the identity and softmax over one
//! key is 1), so Q, K and their norms do not enter.

use backplane_gguf::Gguf;
use backplane_quant::dequantize_row;
use backplane_testmodel::Shape;

/// A tensor's elements as f32, whatever its storage type.
pub fn read_f32(file: &Gguf, name: &str) -> Vec<f32> {
    let t = file
        .tensor(name)
        .unwrap_or_else(|| panic!("tensor {name} missing"));
    let mut out = vec![0.0f32; t.n_elements() as usize];
    dequantize_row(t.dtype, file.tensor_data(t), &mut out).unwrap();
    out
}

/// A weight matrix: `rows` rows of `cols` inputs (ggml's ne[1] x ne[0]).
pub struct Matrix {
    values: Vec<f32>,
    cols: usize,
}

impl Matrix {
    fn load(file: &Gguf, name: &str) -> Matrix {
        let cols = file.tensor(name).unwrap().ne[0] as usize;
        Matrix {
            values: read_f32(file, name),
            cols,
        }
    }

    fn row(&self, r: usize) -> &[f32] {
        &self.values[r * self.cols..(r + 1) * self.cols]
    }

    fn apply(&self, x: &[f32]) -> Vec<f32> {
        assert_eq!(x.len(), self.cols);
        self.values
            .chunks_exact(self.cols)
            .map(|row| row.iter().zip(x).map(|(w, v)| w * v).sum())
            .collect()
    }
}

struct Layer {
    attn_norm: Vec<f32>,
    wv: Matrix,
    bv: Option<Vec<f32>>,
    wo: Matrix,
    ffn_norm: Vec<f32>,
    gate: Matrix,
    up: Matrix,
    down: Matrix,
}

/// The tensors the one-token pass needs.
pub struct Model {
    shape: Shape,
    embd: Matrix,
    layers: Vec<Layer>,
    output_norm: Vec<f32>,
    output: Matrix,
}

/// What the one-token pass produced.
pub struct Run {
    /// RMS of the residual stream before the final norm.
    pub final_rms: f32,
    /// One logit per vocabulary entry.
    pub logits: Vec<f32>,
}

fn rms(x: &[f32]) -> f32 {
    (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32).sqrt()
}

fn rms_norm(x: &[f32], weight: &[f32], eps: f32) -> Vec<f32> {
    let scale = 1.0 / (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32 + eps).sqrt();
    x.iter().zip(weight).map(|(v, w)| v * scale * w).collect()
}

fn add(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

impl Model {
    /// Loads the tensors of a model of `shape` from `file`.
    pub fn load(file: &Gguf, shape: &Shape) -> Model {
        let layers = (0..shape.n_layer)
            .map(|l| {
                let name = |p: &str| format!("blk.{l}.{p}");
                Layer {
                    attn_norm: read_f32(file, &name("attn_norm.weight")),
                    wv: Matrix::load(file, &name("attn_v.weight")),
                    bv: shape.qkv_bias.then(|| read_f32(file, &name("attn_v.bias"))),
                    wo: Matrix::load(file, &name("attn_output.weight")),
                    ffn_norm: read_f32(file, &name("ffn_norm.weight")),
                    gate: Matrix::load(file, &name("ffn_gate.weight")),
                    up: Matrix::load(file, &name("ffn_up.weight")),
                    down: Matrix::load(file, &name("ffn_down.weight")),
                }
            })
            .collect();
        let output_name = if shape.tied_embeddings {
            "token_embd.weight"
        } else {
            "output.weight"
        };
        Model {
            shape: *shape,
            embd: Matrix::load(file, "token_embd.weight"),
            layers,
            output_norm: read_f32(file, "output_norm.weight"),
            output: Matrix::load(file, output_name),
        }
    }

    /// Runs `token` alone at position 0.
    pub fn first_token(&self, token: usize) -> Run {
        let s = &self.shape;
        let mut x = self.embd.row(token).to_vec();
        for layer in &self.layers {
            let h = rms_norm(&x, &layer.attn_norm, s.rms_eps);
            let mut v = layer.wv.apply(&h);
            if let Some(bias) = &layer.bv {
                add(&mut v, bias);
            }
            // Each query head reads its group's KV head's value.
            let group = s.n_head / s.n_head_kv;
            let attn: Vec<f32> = (0..s.n_head)
                .flat_map(|head| {
                    let kv = head / group;
                    v[kv * s.head_dim..(kv + 1) * s.head_dim].to_vec()
                })
                .collect();
            add(&mut x, &layer.wo.apply(&attn));
            let h = rms_norm(&x, &layer.ffn_norm, s.rms_eps);
            let gate = layer.gate.apply(&h);
            let up = layer.up.apply(&h);
            let act: Vec<f32> = gate
                .iter()
                .zip(&up)
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            add(&mut x, &layer.down.apply(&act));
        }
        let final_rms = rms(&x);
        let h = rms_norm(&x, &self.output_norm, s.rms_eps);
        Run {
            final_rms,
            logits: self.output.apply(&h),
        }
    }
}

/// Mean of `x`.
pub fn mean(x: &[f32]) -> f64 {
    x.iter().map(|&v| f64::from(v)).sum::<f64>() / x.len() as f64
}

/// Standard deviation of `x`.
pub fn std(x: &[f32]) -> f32 {
    let mean = mean(x);
    let var = x
        .iter()
        .map(|&v| (f64::from(v) - mean).powi(2))
        .sum::<f64>()
        / x.len() as f64;
    var.sqrt() as f32
}

/// The largest logit minus the second largest.
pub fn top2_gap(logits: &[f32]) -> f32 {
    let (mut first, mut second) = (f32::NEG_INFINITY, f32::NEG_INFINITY);
    for &l in logits {
        if l > first {
            second = first;
            first = l;
        } else if l > second {
            second = l;
        }
    }
    first - second
}

/// Index of the largest logit.
pub fn argmax(logits: &[f32]) -> usize {
    logits
        .iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |best, (i, &l)| {
            if l > best.1 { (i, l) } else { best }
        })
        .0
}

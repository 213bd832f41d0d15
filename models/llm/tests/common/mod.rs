//! Tiny random-weight models built in memory, and a plain f64 forward pass
//! of the same architectures to check the graphs against.

#![allow(dead_code)]

use backplane::DType;
use backplane_llm::{Arch, LoadOptions, MemoryModel, MetaValue, Model};

/// The tiny shape every test uses.
pub struct Tiny {
    pub arch: Arch,
    pub n_vocab: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_ff: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub tied: bool,
}

impl Tiny {
    pub fn new(arch: Arch) -> Tiny {
        Tiny {
            arch,
            n_vocab: 96,
            n_embd: 64,
            n_layer: 2,
            n_ff: 96,
            n_head: 4,
            n_head_kv: 2,
            tied: false,
        }
    }

    pub fn head_dim(&self) -> usize {
        self.n_embd / self.n_head
    }
}

/// Deterministic values in [-1, 1).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
}

/// A model in memory: f32 weights (the values are what the reference reads).
pub struct TinyModel {
    pub source: MemoryModel,
    pub tensors: std::collections::HashMap<String, Vec<f32>>,
    pub spec: Tiny,
}

pub fn make(spec: Tiny, seed: u64) -> TinyModel {
    let mut m = MemoryModel::new(format!("tiny-{}.gguf", spec.arch.name()));
    let a = spec.arch.name();
    let int = |v: usize| MetaValue::Int(v as i64);
    m.set_meta("general.architecture", MetaValue::Str(a.into()));
    m.set_meta(format!("{a}.embedding_length"), int(spec.n_embd));
    m.set_meta(format!("{a}.block_count"), int(spec.n_layer));
    m.set_meta(format!("{a}.feed_forward_length"), int(spec.n_ff));
    m.set_meta(format!("{a}.attention.head_count"), int(spec.n_head));
    m.set_meta(format!("{a}.attention.head_count_kv"), int(spec.n_head_kv));
    m.set_meta(
        format!("{a}.attention.layer_norm_rms_epsilon"),
        MetaValue::Float(1e-5),
    );
    m.set_meta(format!("{a}.rope.freq_base"), MetaValue::Float(10000.0));
    m.set_meta(format!("{a}.context_length"), int(2048));
    let mut rng = Rng(seed | 1);
    let mut tensors = std::collections::HashMap::new();
    let mut add = |name: String, ne: &[usize], scale: f32, offset: f32| {
        let n: usize = ne.iter().product();
        let v: Vec<f32> = (0..n).map(|_| offset + scale * rng.next()).collect();
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let ne64: Vec<i64> = ne.iter().map(|&x| x as i64).collect();
        m.set_tensor(name.clone(), DType::F32, &ne64, bytes);
        tensors.insert(name, v);
    };
    let (e, hd) = (spec.n_embd, spec.head_dim());
    let (q, kv) = (spec.n_head * hd, spec.n_head_kv * hd);
    add("token_embd.weight".into(), &[e, spec.n_vocab], 1.0, 0.0);
    for l in 0..spec.n_layer {
        let p = |s: &str| format!("blk.{l}.{s}");
        add(p("attn_norm.weight"), &[e], 0.2, 1.0);
        add(p("attn_q.weight"), &[e, q], 0.25, 0.0);
        add(p("attn_k.weight"), &[e, kv], 0.25, 0.0);
        add(p("attn_v.weight"), &[e, kv], 0.25, 0.0);
        if spec.arch == Arch::Qwen2 {
            add(p("attn_q.bias"), &[q], 0.3, 0.0);
            add(p("attn_k.bias"), &[kv], 0.3, 0.0);
            add(p("attn_v.bias"), &[kv], 0.3, 0.0);
        }
        if spec.arch == Arch::Qwen3 {
            add(p("attn_q_norm.weight"), &[hd], 0.2, 1.0);
            add(p("attn_k_norm.weight"), &[hd], 0.2, 1.0);
        }
        add(p("attn_output.weight"), &[q, e], 0.2, 0.0);
        add(p("ffn_norm.weight"), &[e], 0.2, 1.0);
        add(p("ffn_gate.weight"), &[e, spec.n_ff], 0.25, 0.0);
        add(p("ffn_up.weight"), &[e, spec.n_ff], 0.25, 0.0);
        add(p("ffn_down.weight"), &[spec.n_ff, e], 0.2, 0.0);
    }
    add("output_norm.weight".into(), &[e], 0.2, 1.0);
    if !spec.tied {
        add("output.weight".into(), &[e, spec.n_vocab], 0.3, 0.0);
    }
    TinyModel {
        source: m,
        tensors,
        spec,
    }
}

pub fn cpu() -> LoadOptions {
    LoadOptions {
        device: "cpu".into(),
        ..LoadOptions::default()
    }
}

pub fn load(t: &TinyModel) -> Model {
    Model::from_source(&t.source, &cpu(), &mut |_| {}).expect("loading the tiny model")
}

/// Normalised mean squared error.
pub fn nmse(got: &[f32], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let err: f64 = got
        .iter()
        .zip(want)
        .map(|(a, b)| (f64::from(*a) - b).powi(2))
        .sum();
    let norm: f64 = want.iter().map(|b| b * b).sum();
    err / norm.max(1e-30)
}

/// `w` is [cols, rows] in ggml order (row r = w[r*cols..]); y = W x.
fn matvec(w: &[f32], x: &[f64], rows: usize) -> Vec<f64> {
    let cols = x.len();
    (0..rows)
        .map(|r| {
            w[r * cols..(r + 1) * cols]
                .iter()
                .zip(x)
                .map(|(a, b)| f64::from(*a) * b)
                .sum()
        })
        .collect()
}

fn rms_norm(x: &[f64], w: &[f32]) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let s = 1.0 / (ms + 1e-5).sqrt();
    x.iter()
        .zip(w)
        .map(|(v, g)| v * s * f64::from(*g))
        .collect()
}

fn rope(head: &mut [f64], pos: usize, neox: bool) {
    let d = head.len();
    for i in 0..d / 2 {
        let theta = pos as f64 * 10000f64.powf(-2.0 * i as f64 / d as f64);
        let (s, c) = theta.sin_cos();
        let (a, b) = if neox {
            (i, i + d / 2)
        } else {
            (2 * i, 2 * i + 1)
        };
        let (x0, x1) = (head[a], head[b]);
        head[a] = x0 * c - x1 * s;
        head[b] = x0 * s + x1 * c;
    }
}

/// Logits of every position of `tokens`, in f64.
pub fn reference(t: &TinyModel, tokens: &[u32]) -> Vec<Vec<f64>> {
    let s = &t.spec;
    let w = |n: &str| t.tensors.get(n).unwrap_or_else(|| panic!("no {n}"));
    let (e, hd) = (s.n_embd, s.head_dim());
    let neox = s.arch != Arch::Llama;
    let mut xs: Vec<Vec<f64>> = tokens
        .iter()
        .map(|&tok| {
            let emb = w("token_embd.weight");
            emb[tok as usize * e..(tok as usize + 1) * e]
                .iter()
                .map(|&v| f64::from(v))
                .collect()
        })
        .collect();
    for l in 0..s.n_layer {
        let p = |n: &str| format!("blk.{l}.{n}");
        let mut qs = Vec::new();
        let mut ks = Vec::new();
        let mut vs = Vec::new();
        for (pos, x) in xs.iter().enumerate() {
            let h = rms_norm(x, w(&p("attn_norm.weight")));
            let mut q = matvec(w(&p("attn_q.weight")), &h, s.n_head * hd);
            let mut k = matvec(w(&p("attn_k.weight")), &h, s.n_head_kv * hd);
            let mut v = matvec(w(&p("attn_v.weight")), &h, s.n_head_kv * hd);
            if s.arch == Arch::Qwen2 {
                for (y, n) in [
                    (&mut q, "attn_q.bias"),
                    (&mut k, "attn_k.bias"),
                    (&mut v, "attn_v.bias"),
                ] {
                    for (a, b) in y.iter_mut().zip(w(&p(n))) {
                        *a += f64::from(*b);
                    }
                }
            }
            for (y, norm) in [
                (&mut q, "attn_q_norm.weight"),
                (&mut k, "attn_k_norm.weight"),
            ] {
                for head in y.chunks_mut(hd) {
                    if s.arch == Arch::Qwen3 {
                        let n = rms_norm(head, w(&p(norm)));
                        head.copy_from_slice(&n);
                    }
                    rope(head, pos, neox);
                }
            }
            qs.push(q);
            ks.push(k);
            vs.push(v);
        }
        let group = s.n_head / s.n_head_kv;
        let scale = 1.0 / (hd as f64).sqrt();
        for (i, x) in xs.iter_mut().enumerate() {
            let mut attn = vec![0.0; s.n_head * hd];
            for h in 0..s.n_head {
                let kvh = h / group;
                let q = &qs[i][h * hd..(h + 1) * hd];
                let scores: Vec<f64> = (0..=i)
                    .map(|j| {
                        let k = &ks[j][kvh * hd..(kvh + 1) * hd];
                        q.iter().zip(k).map(|(a, b)| a * b).sum::<f64>() * scale
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let ex: Vec<f64> = scores.iter().map(|v| (v - m).exp()).collect();
                let z: f64 = ex.iter().sum();
                for (j, p) in ex.iter().enumerate() {
                    for d in 0..hd {
                        attn[h * hd + d] += p / z * vs[j][kvh * hd + d];
                    }
                }
            }
            let o = matvec(w(&p("attn_output.weight")), &attn, e);
            for (a, b) in x.iter_mut().zip(&o) {
                *a += b;
            }
            let h = rms_norm(x, w(&p("ffn_norm.weight")));
            let g = matvec(w(&p("ffn_gate.weight")), &h, s.n_ff);
            let u = matvec(w(&p("ffn_up.weight")), &h, s.n_ff);
            let act: Vec<f64> = g
                .iter()
                .zip(&u)
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            let d = matvec(w(&p("ffn_down.weight")), &act, e);
            for (a, b) in x.iter_mut().zip(&d) {
                *a += b;
            }
        }
    }
    let out = if s.tied {
        "token_embd.weight"
    } else {
        "output.weight"
    };
    xs.iter()
        .map(|x| {
            let h = rms_norm(x, w("output_norm.weight"));
            matvec(w(out), &h, s.n_vocab)
        })
        .collect()
}

/// Deterministic token ids below `n_vocab`.
pub fn tokens(n: usize, n_vocab: usize, seed: u64) -> Vec<u32> {
    let mut r = Rng(seed | 1);
    (0..n)
        .map(|_| ((r.next() + 1.0) * 0.5 * n_vocab as f32) as u32 % n_vocab as u32)
        .collect()
}

//! Norms, softmax and rope.

use backplane::{DType, Op, RopeParams, rope_mode};

use super::{Catalogue, bound_for, dims};
use crate::case::Fill;

pub(super) fn add(c: &mut Catalogue) {
    norms(c);
    soft_max(c);
    rope(c);
}

fn norms(c: &mut Catalogue) {
    for op in [Op::Norm, Op::RmsNorm, Op::L2Norm] {
        for ne in [[64, 5, 4, 3], [1, 1, 1, 1], [4096, 2, 1, 1], [33, 7, 1, 1]] {
            for eps in [1e-6f32, 1e-12, 0.1] {
                let name = format!("{op}(type=f32,ne=[{}],eps={eps:e})", dims(&ne));
                c.push(op, name, 1e-7, move |b| {
                    let x = b.input_with(DType::F32, &ne, Fill::Uniform(-10.0, 10.0))?;
                    match op {
                        Op::Norm => b.g.norm(x, eps),
                        Op::RmsNorm => b.g.rms_norm(x, eps),
                        _ => b.g.l2_norm(x, eps),
                    }
                });
            }
        }
        // Strided rows: a view over every other row.
        let name = format!("{op}(type=f32,ne=[32,5,3,1],perm=[0,2,1,3])");
        c.push(op, name, 1e-7, move |b| {
            let x = b.permuted(
                DType::F32,
                [32, 5, 3, 1],
                [0, 2, 1, 3],
                Fill::Uniform(-1.0, 1.0),
            )?;
            match op {
                Op::Norm => b.g.norm(x, 1e-5),
                Op::RmsNorm => b.g.rms_norm(x, 1e-5),
                _ => b.g.l2_norm(x, 1e-5),
            }
        });
    }
}

fn soft_max(c: &mut Catalogue) {
    for ne in [
        [16, 2, 32, 1],
        [32, 7, 4, 2],
        [1, 1, 1, 1],
        [4096, 3, 2, 1],
        [37, 5, 6, 1],
    ] {
        for mask in [None, Some(DType::F32), Some(DType::F16)] {
            for (scale, max_bias) in [(1.0f32, 0.0f32), (0.1, 0.0), (0.1, 8.0)] {
                if max_bias > 0.0 && mask.is_none() {
                    continue;
                }
                for (m_bcast, sinks) in [(false, false), (true, false), (false, true)] {
                    if m_bcast && mask.is_none() {
                        continue;
                    }
                    let mname = mask.map(|m| m.name()).unwrap_or("none");
                    let name = format!(
                        "SOFT_MAX(type=f32,ne=[{}],mask={mname},m_bcast={m_bcast},sinks={sinks},scale={scale},max_bias={max_bias})",
                        dims(&ne)
                    );
                    c.push(Op::SoftMax, name, 1e-7, move |b| {
                        let x = b.input_with(DType::F32, &ne, Fill::Uniform(-5.0, 5.0))?;
                        let m = match mask {
                            Some(mt) => {
                                let mne = if m_bcast {
                                    [ne[0], ne[1], 1, 1]
                                } else {
                                    [ne[0], ne[1], ne[2], ne[3]]
                                };
                                Some(b.input_with(mt, &mne, Fill::Uniform(-1.0, 1.0))?)
                            }
                            None => None,
                        };
                        let s = if sinks {
                            Some(b.input_with(DType::F32, &[ne[2]], Fill::Uniform(-2.0, 2.0))?)
                        } else {
                            None
                        };
                        b.g.soft_max(x, m, s, scale, max_bias)
                    });
                }
            }
        }
    }
}

fn rope(c: &mut Catalogue) {
    let variants: [(i32, i64, i32, [i32; 4]); 6] = [
        (rope_mode::NORMAL, 128, 128, [0; 4]),
        (rope_mode::NORMAL, 64, 32, [0; 4]),
        (rope_mode::NEOX, 128, 128, [0; 4]),
        (rope_mode::NEOX, 80, 64, [0; 4]),
        (rope_mode::MROPE, 128, 128, [16, 24, 24, 0]),
        (rope_mode::IMROPE, 128, 128, [24, 20, 20, 0]),
    ];
    let mut all = variants.to_vec();
    all.push((rope_mode::VISION, 64, 32, [8, 8, 0, 0]));
    for (mode, ne0, n_dims, sections) in all {
        for dt in [DType::F32, DType::F16] {
            for (ext_factor, freq_scale, ff) in [
                (0.0f32, 1.0f32, false),
                (1.0, 0.25, false),
                (0.0, 1.0, true),
            ] {
                if ff && !(mode == rope_mode::NORMAL || mode == rope_mode::NEOX) {
                    continue;
                }
                let (heads, tokens) = (4i64, 7i64);
                let name = format!(
                    "ROPE(type={dt},ne=[{ne0},{heads},{tokens},1],n_dims={n_dims},mode={mode},ext_factor={ext_factor},freq_scale={freq_scale},ff={ff})"
                );
                c.push(Op::Rope, name, bound_for(dt), move |b| {
                    let x = b.input(dt, &[ne0, heads, tokens, 1])?;
                    let per = if mode & rope_mode::MROPE != 0 { 4 } else { 1 };
                    let pos = b.input_with(DType::I32, &[tokens * per], Fill::Index(4096))?;
                    let f = if ff {
                        Some(b.input_with(
                            DType::F32,
                            &[n_dims as i64 / 2],
                            Fill::Uniform(0.9, 1.1),
                        )?)
                    } else {
                        None
                    };
                    let mut p = RopeParams::new(n_dims, mode);
                    p.n_ctx_orig = 4096;
                    p.ext_factor = ext_factor;
                    p.freq_scale = freq_scale;
                    p.sections = sections;
                    b.g.rope(x, pos, f, p)
                });
            }
        }
    }
    // Rope over a view (strided rows), as llama.cpp applies it to a slice of qkv.
    let name = "ROPE(type=f32,ne=[64,4,5,1],n_dims=64,mode=2,view=1)".to_string();
    c.push(Op::Rope, name, 1e-7, |b| {
        let x = b.input(DType::F32, &[64, 4, 5, 1])?;
        let v = b.g.permute(x, [0, 2, 1, 3])?;
        let pos = b.input_with(DType::I32, &[4], Fill::Index(100))?;
        b.g.rope(v, pos, None, RopeParams::new(64, rope_mode::NEOX))
    });
}
